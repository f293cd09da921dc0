// The `python` and `python_batch` ops: a user's Python function, named by
// import path ("module.sub:fn"), run in a pool of Python processes
// (python_process.h) beside the native ops. Processes, not threads: the GIL
// would run the function one call at a time (as DALI's python_function
// does). It gets a map thread's whole range of rows in one call (a call is
// a round trip to the processes), which goes out in pieces to the free
// processes; each row's draws come from the sample's identity, so the
// output does not depend on how many processes there are or which one ran
// it.
#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "sluice/core/python_pool.h"
#include "sluice/core/status_macros.h"
#include "sluice/core/usable_cores.h"
#include "sluice/io/thread_cancel.h"
#include "sluice/ops/builtin_ops.h"
#include "sluice/ops/field.h"
#include "sluice/ops/op_registry.h"

namespace sluice::ops {
namespace {

struct PythonOpParams {
  std::string function;
  std::string interpreter;
  std::string spec_json;  // what each process is told (sluice/_python_worker.py)
  std::vector<ColumnSpec> inputs, outputs;
  int processes = 1, most_processes = 1;  // the pool starts with `processes`
  bool batched = false;
};

// "image: uint8[32,32,3]" -> the spec; a name alone -> `inputs`' column of
// that name.
absl::StatusOr<ColumnSpec> ParseOutput(absl::string_view text, const std::vector<ColumnSpec>& inputs) {
  const std::vector<absl::string_view> parts = absl::StrSplit(text, absl::MaxSplits(':', 1));
  const std::string name(absl::StripAsciiWhitespace(parts[0]));
  if (name.empty()) return AttrError("outputs", absl::StrCat("'", text, "' names no column"));
  if (parts.size() == 1) {
    for (const ColumnSpec& in : inputs) {
      if (in.name == name && !in.ragged) return in;
    }
    return AttrError("outputs", absl::StrCat("'", name,
                                             "' is not a fixed-shape input: give its dtype and shape, "
                                             "e.g. '",
                                             name, ": uint8[32,32,3]'"));
  }
  absl::string_view type = absl::StripAsciiWhitespace(parts[1]);
  const size_t open = type.find('[');
  if (open == absl::string_view::npos || type.back() != ']') {
    return AttrError("outputs", absl::StrCat("'", text, "' is not 'name: dtype[d0,d1,...]'"));
  }
  ColumnSpec spec;
  spec.name = name;
  SLUICE_ASSIGN_OR_RETURN(spec.dtype, ParseDType(absl::StripAsciiWhitespace(type.substr(0, open))));
  std::vector<int64_t> dims;
  const absl::string_view inside = type.substr(open + 1, type.size() - open - 2);
  for (absl::string_view d : absl::StrSplit(inside, ',', absl::SkipWhitespace())) {
    int64_t n = 0;
    if (!absl::SimpleAtoi(d, &n) || n < 1) {
      return AttrError("outputs", absl::StrCat("'", text, "': dimension '", d, "' is not a positive integer"));
    }
    dims.push_back(n);
  }
  spec.shape = Shape(dims);
  return spec;
}

absl::StatusOr<InferredOp> InferPython(const Attrs& attrs, const Schema& schema, bool batched) {
  PythonOpParams p;
  p.function = attrs.GetString("function");
  const std::string& pickled = attrs.GetString("pickled");
  if (pickled.empty() && p.function.find(':') == std::string::npos) {
    return AttrError("function", absl::StrCat("'", p.function, "' is not 'module.sub:function'"));
  }
  InferredOp op;
  const std::string& names = attrs.GetString("inputs");
  if (names.empty()) {
    for (int i = 0; i < schema.size(); ++i) op.inputs.push_back(i);
  }
  for (absl::string_view name : absl::StrSplit(names, ',', absl::SkipWhitespace())) {
    const std::optional<int> column = schema.Find(absl::StripAsciiWhitespace(name));
    if (!column) {
      return AttrError("inputs", absl::StrCat("names no column ('", name, "'); columns: ", schema.ToString()));
    }
    op.inputs.push_back(*column);
  }
  for (int i : op.inputs) p.inputs.push_back(schema.column(i));
  const std::string& outputs = attrs.GetString("outputs");
  for (absl::string_view text : absl::StrSplit(outputs, ';', absl::SkipWhitespace())) {
    SLUICE_ASSIGN_OR_RETURN(ColumnSpec spec, ParseOutput(text, p.inputs));
    p.outputs.push_back(std::move(spec));
  }
  if (outputs.empty()) {
    for (const ColumnSpec& in : p.inputs) {
      if (in.ragged) {
        return AttrError("outputs", absl::StrCat("is needed: input ", in.ToString(), " has no fixed shape to keep"));
      }
      p.outputs.push_back(in);
    }
  }
  if (p.outputs.empty()) return AttrError("outputs", "names no column");
  p.interpreter = PythonInterpreter(attrs.GetString("python"));
  p.batched = batched;
  // 0: one process, then as many as the op's callers (the map's runners,
  // which the autotuner sets) run at once, up to one per core.
  const int64_t processes = attrs.GetInt("processes");
  p.processes = processes > 0 ? static_cast<int>(processes) : 1;
  p.most_processes = processes > 0 ? p.processes : UsableCores();
  nlohmann::json spec = {{"function", p.function},
                         {"pickled", pickled},
                         {"batched", batched},
                         {"rng", attrs.GetBool("rng")},
                         {"inputs", nlohmann::json::array()},
                         {"outputs", nlohmann::json::array()}};
  for (const ColumnSpec& c : p.inputs) spec["inputs"].push_back(PythonColumnJson(c));
  for (const ColumnSpec& c : p.outputs) spec["outputs"].push_back(PythonColumnJson(c));
  p.spec_json = spec.dump();
  op.outputs = p.outputs;
  op.random = attrs.GetBool("rng");
  op.draws_unseen = !op.random && !attrs.GetBool("deterministic");
  op.SetParams(std::move(p));
  return op;
}

// Where one call's rows sit in its process's shared memory.
struct CallLayout {
  size_t seeds = kPythonHeaderBytes;
  std::vector<size_t> inputs, outputs;
  size_t bytes = 0;
};

class PythonKernel : public Kernel {
 public:
  using Params = PythonOpParams;
  explicit PythonKernel(const Params& p) : p_(p) {}

  absl::Status Setup(const SetupContext&) override {
    // The pipeline's making (this thread) may be stopped by a Ctrl-C.
    SLUICE_ASSIGN_OR_RETURN(pool_,
                            PythonPool::Start(p_.interpreter, p_.spec_json, p_.processes, p_.most_processes,
                                              absl::StrCat("python op '", p_.function, "'"), io::ThreadCancellation()));
    return absl::OkStatus();
  }

  // The processes compute, this thread waits: it lends its share of the
  // engine's cores meanwhile, for the native ops to use.
  absl::Status Run(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                   absl::Span<const ColumnRef> out) const override {
    if (ctx.core != nullptr) ctx.core->Lend();
    absl::Status status = RunInProcesses(ctx, in, out);
    if (ctx.core != nullptr && !ctx.core->Reclaim() && status.ok()) {
      status = absl::CancelledError("pipeline cancelled");
    }
    return status;
  }

 private:
  // The tile goes out in pieces, each to the next process free: one whose
  // core is shared with native threads runs fewer, and processes done
  // with the tile go back to the pool for other callers at once (an even
  // split made each call wait for its slowest process).
  absl::Status RunInProcesses(const KernelContext& ctx, absl::Span<const ColumnRef> in,
                              absl::Span<const ColumnRef> out) const {
    std::vector<std::unique_ptr<PythonProcess>> idle;
    SLUICE_RETURN_IF_ERROR(pool_->Acquire(p_.batched ? 1 : ctx.rows, &idle));
    const int64_t piece = p_.batched ? ctx.rows : PieceRows(ctx.rows, static_cast<int64_t>(idle.size()));
    int64_t next = 0;
    std::vector<Call> running;
    // The error of the earliest row that failed.
    absl::Status status;
    int64_t failed_from = ctx.rows;
    auto note = [&](absl::Status s, int64_t begin) {
      if (!s.ok() && begin < failed_from) status = std::move(s), failed_from = begin;
    };
    for (;;) {
      const int64_t pieces_left = (ctx.rows - next + piece - 1) / piece;
      if (status.ok() && pieces_left > static_cast<int64_t>(idle.size())) {
        pool_->TakeFree(pieces_left - static_cast<int64_t>(idle.size()), &idle);
      }
      while (!idle.empty() && next < ctx.rows && status.ok()) {
        Call call{std::move(idle.back()), next, std::min(ctx.rows, next + piece), {}};
        idle.pop_back();
        next = call.end;
        call.layout = Layout(in, call.begin, call.end);
        const absl::Status sent = Send(ctx, in, call);
        note(sent, call.begin);
        if (sent.ok()) {
          running.push_back(std::move(call));
        } else {
          idle.push_back(std::move(call.process));
        }
      }
      for (std::unique_ptr<PythonProcess>& process : idle) pool_->GiveBack(std::move(process));
      idle.clear();
      // Every process sent to answers, even after an error: the protocol
      // stays in step.
      if (running.empty()) break;
      std::vector<PythonProcess*> waited;
      for (const Call& call : running) waited.push_back(call.process.get());
      // Rows left: a process another caller gives back meanwhile takes some.
      const bool rows_left = status.ok() && next < ctx.rows;
      const size_t i =
          PythonProcess::WaitAny(waited, ctx.cancelled, rows_left ? pool_->free_signal() : -1, ctx.progress);
      if (i == running.size()) continue;
      Call call = std::move(running[i]);
      running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
      note(Receive(ctx, call, out), call.begin);
      idle.push_back(std::move(call.process));
    }
    pool_->Release({});
    return status;
  }

  // One process's piece of a tile: rows [begin, end).
  struct Call {
    std::unique_ptr<PythonProcess> process;
    int64_t begin, end;
    CallLayout layout;
  };

  // About four pieces a process, of at least 8 rows (a piece costs a
  // round trip over the socket) unless the tile is smaller.
  static int64_t PieceRows(int64_t rows, int64_t processes) {
    const int64_t share = (rows + processes - 1) / processes;
    return std::max<int64_t>((share + 3) / 4, std::min<int64_t>(8, share));
  }

  CallLayout Layout(absl::Span<const ColumnRef> in, int64_t begin, int64_t end) const {
    CallLayout l;
    const int64_t rows = end - begin;
    size_t at = PythonAligned(l.seeds + rows * sizeof(uint64_t));
    for (size_t c = 0; c < p_.inputs.size(); ++c) {
      l.inputs.push_back(at);
      if (!p_.inputs[c].ragged) {
        at = PythonAligned(at + rows * p_.inputs[c].row_bytes());
        continue;
      }
      size_t bytes = 0;
      for (int64_t r = begin; r < end; ++r) bytes += in[c].bytes(r).size();
      at = PythonAligned(at + (rows + 1) * sizeof(int64_t) + bytes);
    }
    for (const ColumnSpec& o : p_.outputs) {
      l.outputs.push_back(at);
      at = PythonAligned(at + rows * o.row_bytes());
    }
    l.bytes = at;
    return l;
  }

  absl::Status Send(const KernelContext& ctx, absl::Span<const ColumnRef> in, const Call& call) const {
    SLUICE_ASSIGN_OR_RETURN(uint8_t* memory, call.process->Memory(call.layout.bytes));
    const int64_t rows = call.end - call.begin;
    *reinterpret_cast<int64_t*>(memory) = -1;  // the row it runs, as it says
    auto* seeds = reinterpret_cast<uint64_t*>(memory + call.layout.seeds);
    for (int64_t r = call.begin; r < call.end; ++r) {
      SampleRng rng = ctx.Rng(r);
      const uint64_t high = rng.NextU32();  // two statements: the order of the draws is fixed
      seeds[r - call.begin] = high << 32 | rng.NextU32();
    }
    for (size_t c = 0; c < p_.inputs.size(); ++c) {
      uint8_t* dst = memory + call.layout.inputs[c];
      if (!p_.inputs[c].ragged) {
        const int64_t row_bytes = p_.inputs[c].row_bytes();
        std::memcpy(dst, in[c].data + call.begin * row_bytes, rows * row_bytes);
        continue;
      }
      auto* offsets = reinterpret_cast<int64_t*>(dst);
      uint8_t* bytes = dst + (rows + 1) * sizeof(int64_t);
      offsets[0] = 0;
      for (int64_t r = call.begin; r < call.end; ++r) {
        const absl::string_view v = in[c].bytes(r);
        std::memcpy(bytes + offsets[r - call.begin], v.data(), v.size());
        offsets[r - call.begin + 1] = offsets[r - call.begin] + static_cast<int64_t>(v.size());
      }
    }
    return Failed(ctx, call.begin, call.process->Send(rows), PythonFailure());
  }

  absl::Status Receive(const KernelContext& ctx, const Call& call, absl::Span<const ColumnRef> out) const {
    PythonFailure failure;
    const absl::Status status = call.process->Receive(&failure, ctx.cancelled, ctx.progress);
    if (!status.ok() || !failure.message.empty()) return Failed(ctx, call.begin, status, failure);
    SLUICE_ASSIGN_OR_RETURN(const uint8_t* memory, call.process->Memory(call.layout.bytes));
    for (size_t c = 0; c < p_.outputs.size(); ++c) {
      const int64_t row_bytes = p_.outputs[c].row_bytes();
      std::memcpy(out[c].data + call.begin * row_bytes, memory + call.layout.outputs[c],
                  (call.end - call.begin) * row_bytes);
    }
    return absl::OkStatus();
  }

  // The error of a call whose rows start at `begin`, naming the sample.
  absl::Status Failed(const KernelContext& ctx, int64_t begin, const absl::Status& status,
                      const PythonFailure& failure) const {
    if (status.ok() && failure.message.empty()) return absl::OkStatus();
    if (absl::IsCancelled(status)) return status;  // torn down: no sample to blame
    const std::string where =
        failure.row >= 0 ? ctx.Where(begin + failure.row) : absl::StrCat("the batch starting at ", ctx.Where(begin));
    if (!status.ok()) {
      return absl::AbortedError(absl::StrCat("python op '", p_.function, "': ", status.message(), " running ", where));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("python op '", p_.function, "' failed on ", where, ":\n", failure.message));
  }

  const Params p_;
  std::unique_ptr<PythonPool> pool_;
};

std::vector<AttrSchema> PythonAttrs() {
  return {
      AttrSchema{"function", AttrType::kString, "",
                 "the function, by import path: 'module.sub:fn' (or '/path/script.py:fn'); it takes a dict of numpy "
                 "arrays and returns one. With `pickled`, the callable's name, for messages"},
      AttrSchema{"pickled", AttrType::kString, "\"\"",
                 "the callable itself, as sluice's Python front sends it by value: 'cloudpickle:' and its bytes in "
                 "base64 (empty: `function` is imported)"},
      AttrSchema{"identity", AttrType::kString, "\"\"",
                 "what names the pickled callable in a saved state's fingerprint (its plain pickle's digest, or "
                 "its name): cloudpickle's bytes differ from run to run"},
      AttrSchema{"inputs", AttrType::kString, "\"\"",
                 "the columns it gets, comma-separated (empty: all); bytes columns come as uint8 arrays"},
      AttrSchema{"outputs", AttrType::kString, "\"\"",
                 "the columns it returns, 'name: dtype[d0,d1,...]; ...' (a name alone: as that input); they "
                 "replace columns of the same name (empty: its inputs, as they are)"},
      AttrSchema{"rng", AttrType::kBool, "false",
                 "the function draws from `rng`, a numpy Generator seeded from (seed, op, epoch, sample), which "
                 "it gets whenever it has that parameter: marks the op random"},
      AttrSchema{"deterministic", AttrType::kBool, "false",
                 "the function gives the same output for the same input: it draws no random numbers, from `rng` "
                 "or from a global generator (numpy's, torch's, random's), which sluice cannot see. Only then may "
                 "its output be written once for all epochs (materialize, a kept prefix)"},
      AttrSchema{"processes", AttrType::kInt, "0",
                 "Python processes in its pool (0: as many as its map runs at once, which the autotuner sets, up "
                 "to one per core)"}
          .Range(0, kMostPythonProcesses),
      AttrSchema{"python", AttrType::kString, "\"\"",
                 "the interpreter to run (empty: $SLUICE_PYTHON, which the Python front sets, else python3)"},
  };
}

}  // namespace

absl::Status RegisterPythonOps(OpRegistry* registry) {
  OpSchema sample("python");
  sample.Doc(
      "A Python function of yours on each sample, in a pool of Python processes (no GIL between them); "
      "tensors cross through shared memory. An exception is an error naming the sample, with its "
      "traceback; a wrong output names the column and both specs; a process that dies is an error "
      "naming the sample it ran.");
  OpSchema batch("python_batch");
  batch.Doc(
      "A Python function of yours on whole batches (arrays with the batch dimension first), in a pool of "
      "Python processes, as `python` does per sample.");
  sample.WholeRanges();
  batch.BatchLevel();
  for (OpSchema* op : {&sample, &batch}) {
    for (AttrSchema& a : PythonAttrs()) op->Attr(std::move(a));
    op->Input("inputs", "any columns").Output("outputs", "as declared").Random();
  }
  SLUICE_RETURN_IF_ERROR(registry->AddOp(std::move(
      sample.Infer([](const Attrs& attrs, const Schema& schema) { return InferPython(attrs, schema, false); }))));
  SLUICE_RETURN_IF_ERROR(registry->AddKernel<PythonKernel>("python", Backend::kCpu));
  SLUICE_RETURN_IF_ERROR(registry->AddOp(std::move(
      batch.Infer([](const Attrs& attrs, const Schema& schema) { return InferPython(attrs, schema, true); }))));
  return registry->AddKernel<PythonKernel>("python_batch", Backend::kCpu);
}

}  // namespace sluice::ops
