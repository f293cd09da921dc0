// Pinning a pipeline's files: its source's glob patterns, image folder or
// file list resolved once into the list they name now, kept in the
// definition (SourceDef.pinned). The service pins when a pipeline is
// registered, so the dispatcher counting splits and each worker reading them
// see the same files even when the folder changes in between.
#ifndef SLUICE_GRAPH_PIN_FILES_H_
#define SLUICE_GRAPH_PIN_FILES_H_

#include "absl/status/status.h"
#include "pipeline.pb.h"

namespace sluice::graph {

// Resolves the first node's source in place (a no-op for sources that list
// nothing: arrays, MNIST's two named files, or one pinned already). The
// format's errors: a pattern matching nothing, a missing folder or list.
absl::Status PinFiles(PipelineDef* def);

// Takes what the pinning listing found of each pinned object as what this
// process listed (io/object_listing.h): an object rewritten since the
// dispatcher listed it is then DataLoss on any worker that opens it.
void RecallPinnedVersions(const SourceDef& source);

}  // namespace sluice::graph

#endif  // SLUICE_GRAPH_PIN_FILES_H_
