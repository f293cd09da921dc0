// The one header a C++ trainer or an op plugin includes: running pipelines
// (pipeline.h, pipeline_builder.h), the data they yield (batches of named
// tensors), and writing ops (a schema with its inference, kernels per
// backend, the registry, plugins). Link sluice::sluice (find_package(sluice)).
#ifndef SLUICE_SLUICE_H_
#define SLUICE_SLUICE_H_

#include "sluice/core/batch.h"
#include "sluice/core/dtype.h"
#include "sluice/core/rng.h"
#include "sluice/core/schema.h"
#include "sluice/core/shape.h"
#include "sluice/core/status_macros.h"
#include "sluice/core/tensor.h"
#include "sluice/ops/attrs.h"
#include "sluice/ops/field.h"
#include "sluice/ops/kernel.h"
#include "sluice/ops/op_registry.h"
#include "sluice/ops/op_schema.h"
#include "sluice/ops/plugin.h"
#include "sluice/pipeline.h"
#include "sluice/pipeline_builder.h"
#include "sluice/version.h"

#endif  // SLUICE_SLUICE_H_
