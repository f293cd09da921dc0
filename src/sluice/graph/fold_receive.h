// The consumer's side of a distributed pipeline receives every column's
// bytes once, off the wire. An elementwise op that comes first after the
// distribute node (a rescale or normalize of uint8 pixels, a cast) can run
// on those bytes as they arrive instead of in a map afterwards: the column
// is then written once, as the op's output, and never stored and read back
// in its wire dtype. Outputs are identical (the same kernel on the same
// rows).
#ifndef SLUICE_GRAPH_FOLD_RECEIVE_H_
#define SLUICE_GRAPH_FOLD_RECEIVE_H_

#include "sluice/graph/compiled_pipeline.h"

namespace sluice::graph {

// Moves, for each dense column, the first op of the first map after
// `compiled`'s kRemote node into that node's `ops` when it is elementwise
// (ops::OpSchema::Elementwise), draws nothing, runs on the cpu and writes
// its input column in place. Only batch and prefetch nodes may stand in
// between (they do not change values). A map left without ops goes away.
// Does nothing unless the first node is kRemote.
void FoldIntoReceive(const ops::OpRegistry& registry, CompiledPipeline* compiled);

}  // namespace sluice::graph

#endif  // SLUICE_GRAPH_FOLD_RECEIVE_H_
