#include "sluice/exec/map_plan.h"

#include <algorithm>
#include <cstring>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "sluice/core/status_macros.h"
#include "sluice/exec/node_stats.h"

namespace sluice::exec {
namespace {

// Scratch per thread per tile: small enough to stay in L2 while a tile goes
// through every op of the chain.
constexpr int64_t kScratchBudgetBytes = 256 << 10;
constexpr int64_t kMaxTileRows = 256;

int64_t AlignUp(int64_t n) { return (n + 63) & ~int64_t{63}; }

int64_t RowBytes(const ColumnSpec& spec) {
  return spec.ragged ? 0 : spec.shape.num_elements() * static_cast<int64_t>(DTypeSize(spec.dtype));
}

// Rows of string_views as one contiguous ragged column.
Column GatherViews(const absl::string_view* views, int64_t rows, BufferPool* pool) {
  int64_t total = 0;
  for (int64_t r = 0; r < rows; ++r) total += static_cast<int64_t>(views[r].size());
  Column c{Tensor::Allocate(DType::kUInt8, Shape{total}, pool),
           Tensor::Allocate(DType::kInt64, Shape{rows + 1}, pool)};
  uint8_t* dst = c.values.raw_data();
  int64_t* off = c.offsets.data<int64_t>();
  off[0] = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (!views[r].empty()) std::memcpy(dst + off[r], views[r].data(), views[r].size());
    off[r + 1] = off[r] + static_cast<int64_t>(views[r].size());
  }
  return c;
}

thread_local std::vector<uint8_t> tls_scratch;

}  // namespace

std::unique_ptr<MapPlan> MapPlan::Make(const Schema& input,
                                       const std::vector<graph::BoundOp>& ops) {
  std::unique_ptr<MapPlan> plan(new MapPlan());
  // Current value of each column, by name, in schema order.
  std::vector<std::pair<ColumnSpec, int>> columns;
  for (int i = 0; i < input.size(); ++i) {
    Value v;
    v.spec = input.column(i);
    v.row_bytes = RowBytes(v.spec);
    v.storage = Storage::kInput;
    v.input_column = i;
    plan->values_.push_back(v);
    columns.emplace_back(input.column(i), i);
  }
  auto find = [&](const std::string& name) -> int {
    for (size_t i = 0; i < columns.size(); ++i) {
      if (columns[i].first.name == name) return static_cast<int>(i);
    }
    return -1;
  };

  for (size_t op_index = 0; op_index < ops.size(); ++op_index) {
    const graph::BoundOp& op = ops[op_index];
    const ops::OpBinding& b = op.binding;
    std::vector<int> in_values;
    for (int col : b.inputs) {
      // Bindings index the schema as it stood before this op.
      in_values.push_back(columns[col].second);
    }
    std::vector<int> out_values;
    for (size_t j = 0; j < b.outputs.size(); ++j) {
      const ColumnSpec& spec = b.outputs[j];
      int value;
      if (b.view) {
        value = in_values[0];
      } else {
        Value v;
        v.spec = spec;
        v.views = spec.ragged;
        v.row_bytes = spec.ragged ? static_cast<int64_t>(sizeof(absl::string_view)) : RowBytes(spec);
        plan->values_.push_back(v);
        value = static_cast<int>(plan->values_.size()) - 1;
        out_values.push_back(value);
      }
      const int existing = find(spec.name);
      if (existing >= 0) {
        columns[existing] = {spec, value};
      } else {
        columns.emplace_back(spec, value);
      }
    }
    for (const std::string& drop : b.drops) {
      const int i = find(drop);
      if (i >= 0) columns.erase(columns.begin() + i);
    }
    if (!b.view) {
      plan->steps_.push_back(Step{op.name, static_cast<int>(op_index), op.op_key, b.kernel, in_values, out_values});
    }
  }

  // Final columns: produced values go to output storage; input values are
  // aliased. Everything else is scratch.
  std::vector<ColumnSpec> out_specs;
  for (const auto& [spec, value] : columns) {
    Value& v = plan->values_[value];
    if (v.storage == Storage::kScratch) {
      v.storage = Storage::kOutput;
      v.output_slot = static_cast<int>(plan->output_slot_values_.size());
      plan->output_slot_values_.push_back(value);
    }
    plan->outputs_.push_back(OutputColumn{value, spec});
    out_specs.push_back(spec);
  }
  plan->output_schema_ = Schema(std::move(out_specs));

  for (const Value& v : plan->values_) {
    if (v.storage == Storage::kScratch) plan->scratch_row_bytes_ += v.row_bytes;
  }
  plan->tile_rows_ =
      plan->scratch_row_bytes_ == 0
          ? kMaxTileRows
          : std::clamp<int64_t>(kScratchBudgetBytes / plan->scratch_row_bytes_, 1, kMaxTileRows);
  return plan;
}

std::vector<Tensor> MapPlan::AllocateOutputs(int64_t rows, BufferPool* pool) const {
  std::vector<Tensor> outputs;
  outputs.reserve(output_slot_values_.size());
  for (int value : output_slot_values_) {
    const Value& v = values_[value];
    outputs.push_back(v.views ? Tensor::Allocate(DType::kUInt8, Shape{rows, v.row_bytes}, pool)
                              : Tensor::Allocate(v.spec.dtype, v.spec.shape.WithLeading(rows), pool));
  }
  return outputs;
}

std::vector<size_t> MapPlan::OutputBytes(int64_t rows) const {
  std::vector<size_t> bytes;
  for (int value : output_slot_values_) bytes.push_back(values_[value].row_bytes * rows);
  return bytes;
}

absl::Status MapPlan::RunRows(const Batch& in, int64_t begin, int64_t end, const RunArgs& args,
                              const std::vector<Tensor>& outputs) const {
  const int64_t tile = tile_rows_;
  // Each scratch value gets an aligned region of `tile` rows.
  absl::InlinedVector<int64_t, 16> scratch_base(values_.size(), 0);
  int64_t scratch_bytes = 0;
  for (size_t i = 0; i < values_.size(); ++i) {
    if (values_[i].storage != Storage::kScratch) continue;
    scratch_base[i] = scratch_bytes;
    scratch_bytes += AlignUp(values_[i].row_bytes * tile);
  }
  if (static_cast<int64_t>(tls_scratch.size()) < scratch_bytes) tls_scratch.resize(scratch_bytes);
  uint8_t* scratch = tls_scratch.data();

  auto ref = [&](int value, int64_t row0) {
    const Value& v = values_[value];
    ops::ColumnRef r;
    r.row_bytes = v.row_bytes;
    switch (v.storage) {
      case Storage::kInput: {
        const Column& c = in.columns[v.input_column];
        if (c.ragged()) {
          r.ragged = &c;
          r.ragged_row = row0;
        } else {
          r.data = c.values.raw_data() + row0 * v.row_bytes;
        }
        break;
      }
      case Storage::kOutput:
        r.data = outputs[v.output_slot].raw_data() + row0 * v.row_bytes;
        break;
      case Storage::kScratch:
        r.data = scratch + scratch_base[value];
        break;
    }
    if (v.views) r.views = reinterpret_cast<absl::string_view*>(r.data);
    return r;
  };

  absl::InlinedVector<ops::ColumnRef, 8> ins, outs;
  // Per step, summed here and added to the shared counters once per call:
  // runners share those cache lines. One clock read per step and tile (a
  // step ends where the next begins).
  const bool timed = args.op_ns != nullptr || args.trace != nullptr;
  absl::InlinedVector<int64_t, 16> step_ns(timed ? steps_.size() : 0, 0);
  absl::Status status;
  for (int64_t row0 = begin; row0 < end && status.ok(); row0 += tile) {
    ops::TileContext tc;
    tc.rows = std::min(tile, end - row0);
    tc.first_sample = args.first_sample + row0;
    tc.seed = args.seed;
    tc.epoch = args.epoch;
    tc.provenance = &in.provenance;
    tc.provenance_row = row0;
    int64_t start = timed ? NowNs() : 0;
    for (size_t k = 0; k < steps_.size(); ++k) {
      const Step& step = steps_[k];
      ins.clear();
      outs.clear();
      for (int v : step.inputs) ins.push_back(ref(v, row0));
      for (int v : step.outputs) outs.push_back(ref(v, row0));
      tc.op_key = step.op_key;
      absl::Status s = step.kernel->Run(tc, ins, outs);
      if (timed) {
        const int64_t stop = NowNs();
        step_ns[k] += stop - start;
        if (args.trace) args.trace->Span("op", step.name, start, stop);
        start = stop;
      }
      if (!s.ok()) {
        status = WithContext(s, absl::StrCat("op '", step.name, "'"));
        break;
      }
    }
  }
  if (args.op_ns != nullptr) {
    for (size_t k = 0; k < steps_.size(); ++k) {
      (*args.op_ns)[steps_[k].op_index].fetch_add(step_ns[k], std::memory_order_relaxed);
    }
  }
  return status;
}

Batch MapPlan::Assemble(const Batch& in, const std::vector<Tensor>& outputs, BufferPool* pool) const {
  Batch out;
  out.rows = in.rows;
  out.provenance = in.provenance;
  for (const OutputColumn& oc : outputs_) {
    const Value& v = values_[oc.value];
    Shape shape = oc.spec.shape.WithLeading(in.rows);
    if (v.storage == Storage::kInput) {
      const Column& c = in.columns[v.input_column];
      if (c.ragged()) {
        out.columns.push_back(c);
      } else {  // aliased, possibly under a new type and shape (views)
        out.columns.push_back(
            Column{Tensor(oc.spec.dtype, std::move(shape), c.values.buffer(),
                          c.values.raw_data() - c.values.buffer()->data()),
                   Tensor()});
      }
    } else if (v.views) {
      const Tensor& t = outputs[v.output_slot];
      out.columns.push_back(GatherViews(reinterpret_cast<const absl::string_view*>(t.raw_data()), in.rows, pool));
    } else {
      const Tensor& t = outputs[v.output_slot];
      out.columns.push_back(Column{Tensor(oc.spec.dtype, std::move(shape), t.buffer()), Tensor()});
    }
  }
  return out;
}

absl::Status MapPlan::Run(const Batch& in, const RunArgs& args, Batch* out) const {
  std::vector<Tensor> outputs = AllocateOutputs(in.rows, args.pool);
  SLUICE_RETURN_IF_ERROR(RunRows(in, 0, in.rows, args, outputs));
  *out = Assemble(in, outputs, args.pool);
  return absl::OkStatus();
}

}  // namespace sluice::exec
