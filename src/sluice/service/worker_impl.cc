#include "sluice/service/worker_impl.h"

#include <algorithm>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "sluice/core/backoff.h"
#include "sluice/core/heap_reuse.h"
#include "sluice/core/status_macros.h"
#include "sluice/core/usable_cores.h"
#include "sluice/exec/resume.h"
#include "sluice/graph/compiled_pipeline.h"
#include "sluice/io/object_store.h"
#include "sluice/ops/op_registry.h"
#include "sluice/service/channel.h"
#include "sluice/service/element_spec.h"
#include "sluice/service/encode_ahead.h"
#include "sluice/service/grpc_status.h"
#include "sluice/service/log.h"
#include "sluice/service/unary_call.h"
#include "sluice/service/wire_batch.h"

namespace sluice::service {

namespace {

// The ops a pipeline part may use here: those with a cpu kernel (or views),
// and those with a cuda kernel when this process has a usable GPU; without
// Python, not the python ops, so that the dispatcher sends pipelines
// running Python code to other workers.
std::vector<std::string> RunnableOps(bool python) {
  const ops::OpRegistry& registry = ops::OpRegistry::Global();
  const ops::DeviceRuntime* cuda = registry.runtime(ops::Backend::kCuda);
  const bool gpu = cuda != nullptr && cuda->CheckAvailable().ok();
  std::vector<std::string> names;
  for (const ops::OpSchema* op : registry.List()) {
    if (!python && graph::IsPythonOp(op->name())) continue;
    if (registry.Runs(op->name(), ops::Backend::kCpu) || (gpu && registry.Runs(op->name(), ops::Backend::kCuda))) {
      names.push_back(op->name());
    }
  }
  return names;
}

}  // namespace

WorkerImpl::WorkerImpl(WorkerOptions options)
    : options_(std::move(options)), ops_(RunnableOps(options_.allow_python)) {}

absl::StatusOr<std::unique_ptr<WorkerImpl>> WorkerImpl::Create(WorkerOptions options) {
  std::unique_ptr<WorkerImpl> worker(new WorkerImpl(std::move(options)));
  SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                          MakeChannel(worker->options_.dispatcher, worker->options_.security));
  worker->dispatcher_ = ::sluice::Dispatcher::NewStub(channel);
  return worker;
}

WorkerHeartbeatRequest WorkerImpl::Identity() const {
  absl::MutexLock lock(&mu_);
  WorkerHeartbeatRequest request;
  request.set_worker_id(worker_id_.load());
  request.set_secret(secret_);
  request.set_address(address_);
  return request;
}

absl::Status WorkerImpl::Leave() {
  WorkerHeartbeatRequest request = Identity();
  request.set_leaving(true);
  WorkerHeartbeatResponse response;
  return CallUnary(dispatcher_.get(), &::sluice::Dispatcher::Stub::WorkerHeartbeat, "leave the dispatcher", request,
                   &response, options_.security.token);
}

absl::Status WorkerImpl::Heartbeat() {
  ShmRingWriter::ReleaseRingsOfGoneClients();  // clients that left or died no longer pin their rings
  WorkerHeartbeatRequest request = Identity();
  request.set_active_streams(active_streams_.load());
  request.set_cores(options_.threads > 0 ? options_.threads : UsableCores());
  for (const std::string& op : ops_) request.add_ops(op);
  std::vector<std::shared_ptr<const exec::Pipeline>> idle;
  {
    absl::MutexLock lock(&mu_);
    idle = TakeIdlePipelines();  // a worker no stream asks again still lets go of them
    // What it sent per second since the last beat: the dispatcher's
    // per-worker rate (status, sluice_worker_samples_per_second).
    const absl::Time now = absl::Now();
    const int64_t sent = samples_sent_.load();
    if (last_beat_ != absl::InfinitePast() && now > last_beat_) {
      request.set_samples_per_s(static_cast<double>(sent - sent_at_last_beat_) /
                                absl::ToDoubleSeconds(now - last_beat_));
    }
    last_beat_ = now;
    sent_at_last_beat_ = sent;
    for (const auto& [run, running] : running_) {
      *request.add_running() = running.split;
      request.add_running_batches(running.batches + (running.records_begun ? running.records_begun->load() : 0));
      request.add_running_waits_for_client(running.writing);
    }
    for (JournalSplit& dropped : dropped_) *request.add_dropped() = std::move(dropped);
    dropped_.clear();
    for (JournalSplit& sent : sent_) *request.add_sent() = std::move(sent);
    sent_.clear();
  }
  DropPipelines(std::move(idle));
  WorkerHeartbeatResponse response;
  const absl::Status sent = CallUnary(dispatcher_.get(), &::sluice::Dispatcher::Stub::WorkerHeartbeat,
                                      "worker heartbeat", request, &response, options_.security.token);
  absl::MutexLock lock(&mu_);
  if (!sent.ok()) {  // told with the next beat
    dropped_.insert(dropped_.end(), request.dropped().begin(), request.dropped().end());
    if (absl::IsPermissionDenied(sent) && request.worker_id() != 0) {
      // Its id is another worker's there (a dispatcher that lost its
      // journal): the next beat registers it as a new worker.
      worker_id_ = 0;
      secret_.clear();
      return absl::AbortedError(absl::StrCat(sent.message(), "; registering again as a new worker"));
    }
    return sent;
  }
  secret_ = response.secret();
  if (worker_id_.exchange(response.worker_id()) != response.worker_id()) {
    LogRoutine("worker", absl::StrCat("registered with dispatcher ", options_.dispatcher, " as worker ",
                                      response.worker_id(), " at ", request.address()));
  }
  return absl::OkStatus();
}

absl::StatusOr<ElementSpec> WorkerImpl::Describe(const DescribePipelineRequest& request) const {
  SLUICE_RETURN_IF_ERROR(CheckPython(request.pipeline()));
  return DescribeElements(request.pipeline(), FromProto(request.limits()));
}

absl::Status WorkerImpl::CheckPython(const PipelineDef& def) const {
  if (options_.allow_python || !graph::RunsPython(def)) return absl::OkStatus();
  return absl::PermissionDeniedError(
      "this worker runs no Python code (--no-python), and the pipeline has a python op or a Python dataset: code its "
      "consumer sent");
}

WorkerStatus WorkerImpl::Status() const {
  WorkerStatus out;
  out.set_worker_id(worker_id_.load());
  out.set_dispatcher(options_.dispatcher);
  out.set_active_streams(active_streams_.load());
  out.set_samples_sent(samples_sent_.load());
  out.set_bytes_sent(bytes_sent_.load());
  out.set_samples_sent_shared_memory(samples_sent_shared_memory_.load());
  out.set_object_store_retries(io::ObjectStoreRetries());
  absl::MutexLock lock(&mu_);
  for (const auto& [kind, n] : errors_) (*out.mutable_errors())[kind] = n;
  out.set_pipelines(static_cast<int32_t>(pipelines_.size()));
  for (const auto& [id, cached] : pipelines_) {
    const BufferPool::Stats memory = cached.pipeline->memory();
    out.set_engine_bytes_in_use(out.engine_bytes_in_use() + static_cast<int64_t>(memory.live_bytes));
    out.set_engine_bytes_cached(out.engine_bytes_cached() + static_cast<int64_t>(memory.cached_bytes));
  }
  return out;
}

void WorkerImpl::CountError(absl::StatusCode code) {
  absl::MutexLock lock(&mu_);
  ++errors_[absl::StatusCodeToString(code)];
}

std::shared_ptr<const exec::Pipeline> WorkerImpl::FindPipeline(const std::string& id) {
  std::vector<std::shared_ptr<const exec::Pipeline>> idle;
  std::shared_ptr<const exec::Pipeline> found;
  {
    absl::MutexLock lock(&mu_);
    idle = TakeIdlePipelines();
    auto it = pipelines_.find(id);
    if (it != pipelines_.end()) {
      it->second.last_used = absl::Now();
      found = it->second.pipeline;
    }
  }
  DropPipelines(std::move(idle));
  return found;
}

std::vector<std::shared_ptr<const exec::Pipeline>> WorkerImpl::TakeIdlePipelines() {
  const absl::Time now = absl::Now();
  std::vector<std::shared_ptr<const exec::Pipeline>> idle;
  for (auto it = pipelines_.begin(); it != pipelines_.end();) {
    CachedPipeline& entry = it->second;
    if (entry.pipeline.use_count() > 1) entry.last_used = now;  // a stream runs it
    if (now - entry.last_used <= options_.pipeline_idle) {
      ++it;
      continue;
    }
    idle.push_back(std::move(entry.pipeline));
    it = pipelines_.erase(it);
  }
  return idle;
}

void WorkerImpl::DropPipelines(std::vector<std::shared_ptr<const exec::Pipeline>> idle) {
  if (idle.empty()) return;
  idle.clear();
  GiveBackFreedHeap();
}

absl::StatusOr<std::shared_ptr<const exec::Pipeline>> WorkerImpl::GetPipeline(const std::string& id) {
  if (std::shared_ptr<const exec::Pipeline> cached = FindPipeline(id)) return cached;
  // One stream fetches and builds a pipeline while the others opened with
  // it wait: a definition pinning a million files is a GB and seconds to
  // build, and six streams opened at once built it six times.
  absl::MutexLock building(&build_mu_);
  if (std::shared_ptr<const exec::Pipeline> cached = FindPipeline(id)) return cached;
  GetPipelineRequest request;
  request.set_pipeline_id(id);
  GetPipelineResponse response;
  SLUICE_RETURN_IF_ERROR(CallUnary(dispatcher_.get(), &::sluice::Dispatcher::Stub::GetPipeline, "get pipeline", request,
                                   &response, options_.security.token));
  PipelineDef def = std::move(*response.mutable_pipeline());
  SLUICE_RETURN_IF_ERROR(CheckPython(def));
  if (options_.threads > 0) def.mutable_options()->set_threads(options_.threads);
  SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<exec::Pipeline> pipeline, exec::Pipeline::Create(def));
  absl::MutexLock lock(&mu_);
  CachedPipeline& cached = pipelines_[id];
  cached.pipeline = std::move(pipeline);
  cached.last_used = absl::Now();
  return cached.pipeline;
}

absl::StatusOr<GetSplitResponse> WorkerImpl::NextSplit(const GetSplitRequest& ask,
                                                       const std::function<bool()>& cancelled) {
  const absl::Time give_up = absl::Now() + options_.dispatcher_grace;
  Backoff backoff(absl::Milliseconds(5), absl::Milliseconds(200));
  while (!cancelled()) {
    GetSplitResponse response;
    absl::Status s = CallUnary(dispatcher_.get(), &::sluice::Dispatcher::Stub::GetSplit, "get split", ask, &response,
                               options_.security.token);
    if (s.ok() && response.state() != GetSplitResponse::WAIT) return response;
    if (!s.ok() && !ServerAway(s)) return s;
    if (!s.ok() && absl::Now() > give_up) return s;
    backoff.Wait();
  }
  return absl::CancelledError("stream cancelled by the client");
}

absl::Status WorkerImpl::SendAll(exec::PipelineIterator* it, const StreamBatchesRequest& request, int64_t split,
                                 BatchMessage* header, ShmRingWriter* ring, const WriteFn& write,
                                 const std::function<bool()>& cancelled, bool with_state, bool one_record) {
  header->set_split(split);
  // Over TCP an uncompressed batch is encoded as it is written (its CRC is
  // all there is to encode); compression and the ring's copy go ahead, but
  // for a single record's one message: its encoding thread would overlap
  // nothing (a worker runs thousands of one-image splits an epoch; without
  // it W3 through one local worker went from 800 to 879 images/s).
  const bool ahead = (ring != nullptr || request.compression() != COMPRESSION_NONE) && !one_record;
  EncodeAhead encoded(it, *header, request.compression(), ring, ahead ? 2 : 0, with_state);
  header->clear_files();  // sent once per stream
  while (!cancelled()) {
    EncodeAhead::Encoded message;
    bool end = false;
    SLUICE_RETURN_IF_ERROR(encoded.Next(&message, &end));
    if (end) return absl::OkStatus();
    const size_t bytes = message.bytes.Length();
    if (bytes > static_cast<size_t>(kMaxMessageBytes)) {  // gRPC would refuse it naming nothing
      return absl::ResourceExhaustedError(
          absl::StrCat("an element of ", bytes, " bytes: a stream from a worker carries at most ", kMaxMessageBytes,
                       " bytes a message; batch fewer of these rows per element, or read them in-process"));
    }
    if (!write(&message.bytes)) return absl::CancelledError("the client went away");
    samples_sent_ += message.rows;
    bytes_sent_ += static_cast<int64_t>(bytes + message.ring_bytes);
    if (message.ring_bytes > 0) samples_sent_shared_memory_ += message.rows;
  }
  return absl::CancelledError("stream cancelled by the client");
}

namespace {

// What a run skipped under on_corrupt "skip", for the client to count.
void AttachSkips(const io::CorruptionLog& skipped, BatchMessage* marker) {
  for (const io::CorruptionLog::FileSkips& f : skipped.files()) {
    SkippedRecords* entry = marker->add_skipped();
    entry->set_file(f.file);
    entry->set_records(f.records);
    entry->set_bytes(f.bytes);
  }
  for (const std::string& m : skipped.messages()) marker->add_skip_messages(m);
}

// Where a split's records are, for messages.
std::string DescribeSplit(const exec::Pipeline& pipeline, const io::Split& split) {
  const std::string& file = (*pipeline.compiled().nodes.front().format->files())[split.file];
  if (split.end_record < 0) return absl::StrCat("all of ", file);
  return absl::StrCat("records ", split.begin_record, " to ", split.end_record - 1, " of ", file);
}

}  // namespace

void WorkerImpl::SetWriting(uint64_t run, bool writing) {
  absl::MutexLock lock(&mu_);
  running_[run].writing = writing;
}

absl::Status WorkerImpl::RunSplit(const exec::Pipeline& pipeline, const StreamBatchesRequest& request,
                                  const GetSplitResponse& next, BatchMessage* header, ShmRingWriter* ring,
                                  const WriteFn& write, const std::function<bool()>& cancelled) {
  const int64_t split = next.split();
  uint64_t run;
  {
    absl::MutexLock lock(&mu_);
    run = next_run_++;
    JournalSplit& s = running_[run].split;
    s.set_job_id(request.job_id());
    s.set_epoch(request.epoch());
    s.set_client_id(request.client_id());
    s.set_split(split);
    s.set_stream_id(request.stream_id());
  }
  struct Done {
    WorkerImpl* self;
    uint64_t run;
    bool finished = false;  // its end sent
    ~Done() {
      absl::MutexLock lock(&self->mu_);
      (finished ? self->sent_ : self->dropped_).push_back(self->running_[run].split);
      self->running_.erase(run);
    }
  } done{this, run};
  // A write blocks while the client is slow to take batches: the split is
  // alive then, and the heartbeat says so.
  const WriteFn waiting = [&](grpc::ByteBuffer* bytes) {
    SetWriting(run, true);
    const bool written = write(bytes);
    SetWriting(run, false);
    return written;
  };
  const WriteFn counted = [&](grpc::ByteBuffer* bytes) {
    {
      absl::MutexLock lock(&mu_);
      ++running_[run].batches;
    }
    return waiting(bytes);
  };
  // A resumed client's partial split starts after its done records where
  // the source can start at a record; elsewhere the client drops them.
  io::Split part = pipeline.Splits()[split];
  const bool seeks = pipeline.compiled().nodes.front().format->SeeksRecords();
  if (seeks && next.first_record() > part.begin_record &&
      (part.end_record < 0 || next.first_record() <= part.end_record)) {
    part.begin_record = next.first_record();
  }
  std::unique_ptr<exec::PipelineIterator> it = pipeline.IterateSplits(request.epoch(), {part});
  {
    absl::MutexLock lock(&mu_);
    running_[run].records_begun = it->progress();
  }
  const absl::Status sent =
      SendAll(it.get(), request, split, header, ring, counted, cancelled, false, part.records() == 1);
  if (absl::IsResourceExhausted(sent)) {  // an element too large, or no memory for one: where it came from
    return absl::ResourceExhaustedError(
        absl::StrCat(sent.message(), " (split ", split, ": ", DescribeSplit(pipeline, part), ")"));
  }
  SLUICE_RETURN_IF_ERROR(sent);
  BatchMessage split_end;
  split_end.set_split(split);
  split_end.set_split_end(true);
  AttachSkips(it->skipped(), &split_end);
  grpc::ByteBuffer marker = SerializeMessage(split_end);
  if (!waiting(&marker)) return absl::CancelledError("the client went away");
  done.finished = true;
  return absl::OkStatus();
}

absl::Status WorkerImpl::FailedSplit(const exec::Pipeline& pipeline, const StreamBatchesRequest& request,
                                     const GetSplitResponse& failed, const WriteFn& write) {
  const io::Split& split = pipeline.Splits()[failed.split()];
  const std::string what =
      absl::StrCat("job ", request.job_id(), ": ", failed.error(), " (it holds ", DescribeSplit(pipeline, split), ")");
  if (!failed.skip()) return absl::DataLossError(what);
  Log("worker", absl::StrCat(what, "; skipped (on_corrupt \"skip\")"));
  BatchMessage skipped;
  skipped.set_split(failed.split());
  skipped.set_split_skipped(true);
  skipped.set_skip_reason(what);
  skipped.set_skipped_records(split.records());
  skipped.set_skipped_file((*pipeline.compiled().nodes.front().format->files())[split.file]);
  grpc::ByteBuffer marker = SerializeMessage(skipped);
  if (!write(&marker)) return absl::CancelledError("the client went away");
  return absl::OkStatus();
}

absl::Status WorkerImpl::SendEpoch(const exec::Pipeline& pipeline, const StreamBatchesRequest& request,
                                   BatchMessage* header, ShmRingWriter* ring, const WriteFn& write,
                                   const std::function<bool()>& cancelled, BatchMessage* epoch_end) {
  std::unique_ptr<exec::PipelineIterator> it;
  if (request.resume_state().empty()) {
    it = pipeline.Iterate(request.epoch());
  } else {
    absl::StatusOr<std::unique_ptr<exec::PipelineIterator>> resumed = pipeline.Resume(request.resume_state());
    if (!resumed.ok()) return WithContext(resumed.status(), absl::StrCat("job ", request.job_id(), ": resuming"));
    it = *std::move(resumed);
  }
  const bool sharded = exec::Has(pipeline.compiled(), graph::NodeKind::kShard);
  SLUICE_RETURN_IF_ERROR(SendAll(it.get(), request, -1, header, ring, write, cancelled, sharded));
  AttachSkips(it->skipped(), epoch_end);
  return absl::OkStatus();
}

absl::Status WorkerImpl::StreamBatches(const StreamBatchesRequest& request, const WriteFn& write,
                                       const std::function<bool()>& cancelled) {
  const auto shutting_down = [this] {
    absl::MutexLock lock(&mu_);
    return absl::UnavailableError(absl::StrCat("worker ", worker_id_.load(), " at ", address_,
                                               " is shutting down; its splits go to the other workers"));
  };
  if (draining_) return shutting_down();
  SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<const exec::Pipeline> pipeline, GetPipeline(request.pipeline_id()));
  ++active_streams_;
  struct Done {
    std::atomic<int>* n;
    ~Done() { --*n; }
  } done{&active_streams_};
  BatchMessage message;
  const graph::CompiledNode& source = pipeline->compiled().nodes.front();
  for (const std::string& f : *source.format->files()) message.add_files(f);
  // A client on this host offers a ring; elsewhere it is not there to claim.
  std::unique_ptr<ShmRingWriter> ring;
  if (!request.shm_ring().empty() && request.compression() == COMPRESSION_NONE) {
    absl::StatusOr<std::unique_ptr<ShmRingWriter>> claimed =
        ShmRingWriter::Claim(request.shm_ring(), request.shm_session());
    if (claimed.ok()) ring = *std::move(claimed);
  }

  BatchMessage epoch_end;
  if (request.mode() == PARALLEL_EPOCHS) {
    SLUICE_RETURN_IF_ERROR(SendEpoch(*pipeline, request, &message, ring.get(), write, cancelled, &epoch_end));
  } else {
    GetSplitRequest ask;
    ask.set_job_id(request.job_id());
    ask.set_client_id(request.client_id());
    ask.set_epoch(request.epoch());
    ask.set_stream_id(request.stream_id() != 0 ? request.stream_id()
                                               : absl::Uniform<uint64_t>(absl::BitGen(), 1, UINT64_MAX));
    const int64_t splits = static_cast<int64_t>(pipeline->Splits().size());
    for (int64_t seq = 1;; ++seq) {
      if (draining_) return shutting_down();  // between splits: nothing of one is lost
      ask.set_worker_id(worker_id_.load());
      ask.set_seq(seq);
      absl::StatusOr<GetSplitResponse> asked = NextSplit(ask, [&] { return cancelled() || draining_; });
      if (!asked.ok() && draining_ && !cancelled()) return shutting_down();
      SLUICE_ASSIGN_OR_RETURN(GetSplitResponse next, std::move(asked));
      if (next.state() == GetSplitResponse::END) break;
      if (next.split() < 0 || next.split() >= splits) {
        return absl::FailedPreconditionError(absl::StrCat("the dispatcher handed out split ", next.split(), " of ",
                                                          splits,
                                                          ": do the dispatcher and this worker see the same files?"));
      }
      if (next.state() == GetSplitResponse::FAILED) {
        SLUICE_RETURN_IF_ERROR(FailedSplit(*pipeline, request, next, write));
      } else {
        SLUICE_RETURN_IF_ERROR(RunSplit(*pipeline, request, next, &message, ring.get(), write, cancelled));
      }
    }
  }
  epoch_end.set_split(-1);
  epoch_end.set_epoch_end(true);
  grpc::ByteBuffer marker = SerializeMessage(epoch_end);
  if (!write(&marker)) return absl::CancelledError("the client went away");
  return absl::OkStatus();
}

}  // namespace sluice::service
