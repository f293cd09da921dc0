// A map-style Python dataset (anything with __len__ and __getitem__, a
// torch Dataset as it is) as a source: its items are made in a pool of
// Python processes (core/python_pool.h) by index, so splits are index
// ranges and shuffling, distribution and exactly-once work as for files.
// The dataset comes to the processes by import path of a function that
// returns it, or as a pickle file the Python front wrote. A generator (an
// iterable's factory) is one split of unknown length, made in order by
// one process.
#ifndef SLUICE_IO_PYTHON_DATASET_SOURCE_H_
#define SLUICE_IO_PYTHON_DATASET_SOURCE_H_

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sluice/core/schema.h"
#include "sluice/io/source_format.h"

namespace sluice::io {

struct PythonDatasetOptions {
  std::string dataset;              // "module.sub:factory" or "pickle:/path/file"
  std::string name;                 // for provenance and errors ("MyDataset")
  int64_t length = 0;               // unused for a generator
  bool generator = false;           // `dataset` is an iterable's factory
  std::vector<ColumnSpec> columns;  // what each item becomes; ragged: bytes
  std::set<std::string> images;     // ragged columns the items give as decoded images
  int processes = 1;
  std::string interpreter;
  int64_t split_records = 0;  // 0: 64
};

absl::StatusOr<std::unique_ptr<SourceFormat>> MakePythonDatasetSource(PythonDatasetOptions options);

}  // namespace sluice::io

#endif  // SLUICE_IO_PYTHON_DATASET_SOURCE_H_
