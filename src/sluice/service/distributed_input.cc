#include "sluice/service/distributed_input.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "sluice/core/backoff.h"
#include "sluice/core/status_macros.h"
#include "sluice/graph/fingerprint.h"
#include "sluice/io/thread_cancel.h"
#include "sluice/service/channel.h"
#include "sluice/service/element_spec.h"
#include "sluice/service/epoch_reader.h"
#include "sluice/service/grpc_status.h"
#include "sluice/service/job_consumers.h"
#include "sluice/service/log.h"
#include "sluice/service/rank_stream_reader.h"
#include "sluice/service/unary_call.h"

namespace sluice::service {
namespace {

// Splits of one record each: an image folder's, a file list's.
bool OneRecordEach(const std::vector<io::Split>& splits) {
  return !splits.empty() &&
         std::all_of(splits.begin(), splits.end(), [](const io::Split& s) { return s.records() == 1; });
}

// A stream's ring: as configured, or (by default) grown to hold a few of
// the part's batches, so that a worker a little ahead of its consumer never
// falls back to TCP (W3's 128 images of 224x224 are 77 MB a batch). A job
// of one-record splits has a few streams per worker core, each carrying one
// row at a time: its rings hold twice the stream's outstanding rows, not
// 64 MiB each; 8 MiB when a row's size is not known (ragged columns).
size_t RingBytes(const ClientOptions& options, const Schema& schema, const ElementSpec& element,
                 bool one_record_splits) {
  if (!options.shared_memory_auto || options.shared_memory_bytes == 0) return options.shared_memory_bytes;
  constexpr size_t kBatchesHeld = 3;
  constexpr size_t kMaxAutoBytes = size_t{1} << 30;
  constexpr size_t kRaggedRowRingBytes = size_t{8} << 20;
  constexpr size_t kMinRowRingBytes = size_t{1} << 20;
  size_t row = 0;
  bool ragged = false;
  for (const ColumnSpec& c : schema.columns()) {
    row += static_cast<size_t>(c.row_bytes());
    ragged = ragged || c.ragged;
  }
  if (one_record_splits) {
    const size_t rows_held = static_cast<size_t>(std::max(1, options.max_outstanding)) + 2;
    const size_t least = ragged ? kRaggedRowRingBytes : kMinRowRingBytes;
    return std::min(std::max(least, 2 * rows_held * row), kMaxAutoBytes);
  }
  const size_t batch = element.batched() ? row * static_cast<size_t>(std::max<int64_t>(element.batch_size(), 1)) : row;
  return std::max(options.shared_memory_bytes, std::min(kBatchesHeld * batch, kMaxAutoBytes));
}

// The workers' part's shard (its count and index resolved: ResolveShards),
// whose per-shard batch is the part's.
absl::StatusOr<std::optional<graph::ShardSpec>> ShardingOf(const PipelineDef& part, const ElementSpec& element) {
  for (int i = 0; i < part.nodes_size(); ++i) {
    if (!part.nodes(i).has_shard()) continue;
    SLUICE_ASSIGN_OR_RETURN(graph::ShardSpec spec,
                            graph::ShardSpecOf(part.nodes(i).shard(), absl::StrCat("nodes[", i, "] (shard)")));
    spec.batch = element.batched() ? element.batch_size() : 1;
    return spec;
  }
  return std::nullopt;
}

constexpr absl::Duration kHeartbeatPeriod = absl::Milliseconds(200);

absl::StatusOr<Schema> ToSchema(const ElementSpec& element) {
  std::vector<ColumnSpec> columns;
  for (const ColumnSpecProto& p : element.columns()) {
    ColumnSpec c;
    c.name = p.name();
    SLUICE_ASSIGN_OR_RETURN(c.dtype, ParseDType(p.dtype()));
    c.shape = Shape(absl::MakeConstSpan(p.shape().data(), p.shape().size()));
    // A row must fit a batch message; checked as the batches are decoded
    // by this schema.
    int64_t row_bytes = static_cast<int64_t>(DTypeSize(c.dtype));
    for (int64_t d : p.shape()) {
      if (d < 0) {
        return absl::DataLossError(absl::StrCat("the dispatcher's element spec: column '", p.name(), "' of shape ",
                                                c.shape.ToString(), " has a negative dimension"));
      }
      if (__builtin_mul_overflow(row_bytes, d, &row_bytes) || row_bytes > kMaxMessageBytes) {
        return absl::InvalidArgumentError(absl::StrCat(
            "column '", p.name(), "' of shape ", c.shape.ToString(), " has rows of more than ", kMaxMessageBytes,
            " bytes, the most one message of the service carries: run the op that makes it after the distribute node, "
            "or make its rows smaller"));
      }
    }
    c.ragged = p.ragged();
    columns.push_back(std::move(c));
  }
  return Schema(std::move(columns));
}

// The splits the element spec lists; none when it lists them wrongly (a
// dispatcher of an older version lists none).
std::vector<io::Split> ToSplits(const ElementSpec& element) {
  const auto& bounds = element.splits();
  if (bounds.size() != 3 * element.num_splits()) return {};
  std::vector<io::Split> splits(static_cast<size_t>(element.num_splits()));
  for (size_t s = 0; s < splits.size(); ++s) {
    splits[s].file = static_cast<int32_t>(bounds[static_cast<int>(3 * s)]);
    splits[s].begin_record = bounds[static_cast<int>(3 * s + 1)];
    splits[s].end_record = bounds[static_cast<int>(3 * s + 2)];
  }
  return splits;
}

// A pipeline past what a dispatcher takes in a request, which gRPC would
// refuse naming only sizes: says how large it is and which node makes it
// so (an arrays source carries its data inside the pipeline).
absl::Status CheckRegistrable(const PipelineDef& part, const std::string& dispatcher) {
  constexpr size_t kMiB = 1 << 20;
  const size_t bytes = part.ByteSizeLong();
  if (bytes + kMiB / 16 <= static_cast<size_t>(kMaxRequestBytes)) return absl::OkStatus();  // room for the rest
  int largest = 0;
  for (int i = 1; i < part.nodes_size(); ++i) {
    if (part.nodes(i).ByteSizeLong() > part.nodes(largest).ByteSizeLong()) largest = i;
  }
  const NodeDef& node = part.nodes(largest);
  const bool inline_data = node.has_source() && (node.source().has_arrays() || node.source().has_arrow_memory());
  return absl::InvalidArgumentError(absl::StrCat(
      "dispatcher ", dispatcher, ": the pipeline to register is ", (bytes + kMiB - 1) / kMiB, " MiB, past the ",
      kMaxRequestBytes / kMiB, " MiB a dispatcher takes; nodes[", largest, "] is ",
      (node.ByteSizeLong() + kMiB - 1) / kMiB, " MiB of it",
      inline_data ? " (a source of arrays in memory carries them inside the pipeline): write them to files the "
                    "workers can read (Parquet, Arrow IPC, TFRecord) and distribute a source of those"
                  : ""));
}

// What the channel's connection attempts run into (a TLS handshake that
// fails, a connection refused), which a call waiting for the channel does
// not say: a call that does not wait fails with it. "" when that call does
// not fail so, or finds nothing listening.
std::string LastConnectError(::sluice::Dispatcher::Stub* dispatcher, const SecurityOptions& security) {
  grpc::ClientContext context;
  AddToken(&context, security.token);
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(2)));
  GetStatusRequest request;
  DispatcherStatus status;
  const grpc::Status called = dispatcher->GetStatus(&context, request, &status);
  const std::string& message = called.error_message();
  // Refused: the caller's own words say more (nothing listens there).
  if (called.error_code() != grpc::StatusCode::UNAVAILABLE || absl::StrContains(message, "Connection refused")) {
    return "";
  }
  const bool tls_words = absl::StrContains(message, "SSL") || absl::StrContains(message, "Ssl") ||
                         absl::StrContains(message, "handshake") || absl::StrContains(message, "Socket closed");
  return absl::StrCat(
      "its connection attempts fail: ", message,
      !tls_words ? ""
      : security.ca_file.empty()
          ? " (a dispatcher with TLS needs tls_ca_file, the CA that signed its certificate)"
          : " (TLS: is tls_ca_file the CA that signed the dispatcher's certificate, does the dispatcher use TLS, and "
            "does it require a client certificate, tls_cert_file and tls_key_file?)");
}

// Registers `workers_part`. The first call waits for the dispatcher to
// come up (an embedded one may still be starting; a remote one may be
// restarting), up to connect_timeout_s; a Ctrl-C stops it at once.
absl::Status Register(const ClientOptions& options, grpc::Channel* channel, ::sluice::Dispatcher::Stub* dispatcher,
                      const PipelineDef& workers_part, RegisterPipelineResponse* registered) {
  RegisterPipelineRequest reg;
  *reg.mutable_pipeline() = workers_part;
  grpc::ClientContext context;
  AddToken(&context, options.security.token);
  context.set_wait_for_ready(true);
  context.set_deadline(absl::ToChronoTime(absl::Now() + options.connect_timeout));
  const grpc::Status called = WaitUnlessCancelled(&context, [&](std::function<void(grpc::Status)> done) {
    dispatcher->async()->RegisterPipeline(&context, &reg, registered, std::move(done));
  });
  if (io::ThreadCancelled()) {
    return absl::CancelledError(
        absl::StrCat("stopped while waiting for the dispatcher ", options.dispatcher, " to register the pipeline"));
  }
  if (called.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED &&
      channel->GetState(/*try_to_connect=*/false) != GRPC_CHANNEL_READY) {
    // Waiting for it to come up ran out: gRPC says only "Deadline Exceeded".
    std::string why = WhyUnreachable(options.dispatcher);
    if (why.empty()) why = LastConnectError(dispatcher, options.security);
    return absl::UnavailableError(absl::StrCat(
        "dispatcher ", options.dispatcher, ": not reachable within connect_timeout_s (",
        absl::FormatDuration(options.connect_timeout), "): ",
        why.empty() ? "no dispatcher listening there (not started, another port or host), or the network refuses it"
                    : why));
  }
  if (called.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    // Reached, but registering outlasted the wait: describing the
    // pipeline lists its files, which a store that does not answer holds up.
    return absl::DeadlineExceededError(absl::StrCat(
        "dispatcher ", options.dispatcher, ": registering the pipeline took longer than connect_timeout_s (",
        absl::FormatDuration(options.connect_timeout),
        "): describing it loads its Python code (a dataset, a transform) on a worker, in a fresh process, and "
        "lists its files, and an object store that does not answer is retried for up to "
        "SLUICE_OBJECT_STORE_TIMEOUT_S (60 s by default); check that the store answers, or give connect_timeout_s "
        "more"));
  }
  return FromGrpc(called, absl::StrCat("dispatcher ", options.dispatcher));
}

}  // namespace

absl::StatusOr<std::shared_ptr<DistributedInput>> DistributedInput::Connect(ClientOptions options,
                                                                            const PipelineDef& workers_part) {
  SLUICE_RETURN_IF_ERROR(CheckAddress(options.dispatcher));
  SLUICE_RETURN_IF_ERROR(CheckRegistrable(workers_part, options.dispatcher));
  std::shared_ptr<DistributedInput> input(new DistributedInput(std::move(options)));
  const std::string& token = input->options_.security.token;
  SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                          MakeChannel(input->options_.dispatcher, input->options_.security));
  input->dispatcher_ = ::sluice::Dispatcher::NewStub(channel);
  RegisterPipelineResponse registered;
  SLUICE_RETURN_IF_ERROR(Register(input->options_, channel.get(), input->dispatcher_.get(), workers_part, &registered));
  input->workers_part_ = workers_part;
  input->workers_fingerprint_ = graph::OutputFingerprint(workers_part);
  input->pipeline_id_ = registered.pipeline_id();
  input->element_ = registered.element();
  SLUICE_ASSIGN_OR_RETURN(input->schema_, ToSchema(input->element_));
  input->splits_ = ToSplits(input->element_);

  GetOrCreateJobRequest job;
  job.set_pipeline_id(input->pipeline_id_);
  job.set_mode(input->options_.mode);
  job.set_job_name(input->options_.job_name);
  GetOrCreateJobResponse joined;
  SLUICE_RETURN_IF_ERROR(CallUnary(input->dispatcher_.get(), &::sluice::Dispatcher::Stub::GetOrCreateJob,
                                   "get or create job", job, &joined, token));
  input->job_id_ = joined.job_id();
  input->client_id_ = joined.client_id();
  input->job_uid_ = joined.job_uid();
  if (joined.has_element()) {  // the job's pin
    input->element_ = joined.element();
    input->splits_ = ToSplits(input->element_);
  }
  if (!joined.pipeline_id().empty()) input->pipeline_id_ = joined.pipeline_id();  // the job's pin
  if (!input->options_.job_name.empty()) input->WarnOfAnotherConsumerHere();
  SLUICE_ASSIGN_OR_RETURN(input->sharding_, ShardingOf(workers_part, input->element_));
  input->one_record_splits_ = input->options_.mode == DISTRIBUTED_EPOCH && OneRecordEach(input->splits_);
  input->ring_bytes_ = RingBytes(input->options_, input->schema_, input->element_, input->one_record_splits_);
  SLUICE_RETURN_IF_ERROR(input->Heartbeat(input->DispatcherCallTimeout()));
  DistributedInput* raw = input.get();
  input->heartbeats_ = std::thread([raw] { raw->BeatUntilStopped(); });
  return input;
}

void DistributedInput::WarnOfAnotherConsumerHere() {
  int others = 0;
  job_consumer_ = CountJobConsumer(absl::StrCat(options_.dispatcher, "/", job_id_), &others);
  if (others == 0) return;
  Log("client", absl::StrCat("this process already consumes job '", options_.job_name, "' through ", others,
                             " other pipeline(s): they share each epoch's samples, and an epoch ends for each only "
                             "once the others have taken theirs. An earlier cell's iterator no longer read holds "
                             "its share until it is dropped (del it and its pipeline)"));
}

void DistributedInput::BeatUntilStopped() {
  Backoff backoff(kHeartbeatPeriod, absl::Seconds(2));
  absl::Time unreachable_since = absl::InfiniteFuture();
  absl::Time next_beat = absl::Now() + kHeartbeatPeriod;
  std::vector<ReportSplitsRequest> unsent;  // retried with the next beat
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithDeadline(
          absl::Condition(
              +[](DistributedInput* in) ABSL_NO_THREAD_SAFETY_ANALYSIS { return in->stop_ || !in->reports_.empty(); },
              this),
          next_beat);
      if (stop_) return;
      unsent.insert(unsent.end(), reports_.begin(), reports_.end());
      reports_.clear();
    }
    // A hung dispatcher holds each call to its deadline: the wait counts
    // from the unanswered call's start, and no call outlasts the timeout.
    const absl::Time attempt = absl::Now();
    const absl::Duration timeout = DispatcherCallTimeout(unreachable_since);
    absl::Status s = SendReports(&unsent, timeout);
    const bool beat = absl::Now() >= next_beat;
    if (s.ok() && beat) s = Heartbeat(timeout);
    if (s.ok()) {
      if (unreachable_since != absl::InfiniteFuture()) Log("client", "dispatcher reachable again");
      unreachable_since = absl::InfiniteFuture();
      backoff.Reset();
      if (beat) next_beat = absl::Now() + kHeartbeatPeriod;
      continue;
    }
    next_beat = absl::Now() + backoff.Next();
    absl::Status fatal;
    if (absl::IsNotFound(s)) {
      fatal = absl::FailedPreconditionError(absl::StrCat(
          "the dispatcher at ", options_.dispatcher, " no longer knows client ", client_id_, " of job ", job_id_,
          " (it restarted without its --work-dir journal, or this client was silent longer than its "
          "--client-timeout): the epoch cannot go on exactly once; start the pipeline again"));
    } else if (ServerAway(s)) {
      const absl::Time now = absl::Now();
      if (unreachable_since == absl::InfiniteFuture()) {
        unreachable_since = attempt;
        if (now - attempt < options_.dispatcher_timeout) {
          Log("client",
              absl::StrCat(s.ToString(), "; retrying for ", absl::FormatDuration(options_.dispatcher_timeout)));
        }
      }
      if (now - unreachable_since >= options_.dispatcher_timeout) {
        fatal =
            absl::UnavailableError(absl::StrCat("the dispatcher at ", options_.dispatcher, " has been unreachable for ",
                                                absl::FormatDuration(options_.dispatcher_timeout),
                                                " (distribute's dispatcher_timeout_s); last error: ", s.message(),
                                                ". This pipeline's client gave up its job: its later epochs fail "
                                                "with this error; make the pipeline again to join anew"));
      }
    } else {
      fatal = s;  // refused (a wrong token, a changed certificate): retrying will not help
    }
    if (!fatal.ok()) {
      Log("client", fatal.ToString());
      absl::MutexLock lock(&mu_);
      fatal_ = fatal;
      return;
    }
  }
}

absl::Status DistributedInput::SendReports(std::vector<ReportSplitsRequest>* reports, absl::Duration timeout) {
  while (!reports->empty()) {
    ReportSplitsResponse ignored;
    SLUICE_RETURN_IF_ERROR(CallUnary(dispatcher_.get(), &::sluice::Dispatcher::Stub::ReportSplits, "report splits",
                                     reports->front(), &ignored, options_.security.token, timeout));
    reports->erase(reports->begin());
    absl::MutexLock lock(&mu_);
    --unsent_reports_;
  }
  return absl::OkStatus();
}

absl::Status DistributedInput::Fatal() const {
  {
    absl::MutexLock lock(&mu_);
    if (!fatal_.ok()) return fatal_;
  }
  return owned_failure_ ? owned_failure_() : absl::OkStatus();
}

DistributedInput::~DistributedInput() {
  std::vector<ReportSplitsRequest> last;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    last.swap(reports_);
  }
  if (heartbeats_.joinable()) heartbeats_.join();
  if (dispatcher_ && Fatal().ok()) (void)SendReports(&last, DispatcherCallTimeout());  // one try: the job ends
  ReleaseClientRequest release;
  release.set_job_id(job_id_);
  release.set_client_id(client_id_);
  ReleaseClientResponse ignored;
  if (dispatcher_ && client_id_ > 0) {  // a dispatcher found lost is given a moment only
    (void)CallUnary(dispatcher_.get(), &::sluice::Dispatcher::Stub::ReleaseClient, "release client", release, &ignored,
                    options_.security.token, Fatal().ok() ? DispatcherCallTimeout() : absl::Seconds(1));
  }
}

absl::Duration DistributedInput::DispatcherCallTimeout(absl::Time unreachable_since) const {
  const absl::Duration left = unreachable_since == absl::InfiniteFuture()
                                  ? options_.dispatcher_timeout
                                  : unreachable_since + options_.dispatcher_timeout - absl::Now();
  return std::clamp(left, absl::Milliseconds(1), absl::Seconds(10));
}

absl::Status DistributedInput::Heartbeat(absl::Duration timeout) {
  ClientHeartbeatRequest request;
  request.set_job_id(job_id_);
  request.set_client_id(client_id_);
  request.set_epoch(epoch_.load());
  {
    absl::MutexLock lock(&mu_);
    const double seconds = absl::ToDoubleSeconds(absl::Now() - last_heartbeat_);
    if (seconds > 0 && last_heartbeat_ != absl::Time()) {
      request.set_samples_per_s(samples_ / seconds);
      request.set_bytes_per_s(bytes_ / seconds);
      request.set_wait_share(std::min(1.0, absl::ToDoubleSeconds(waited_) / seconds));
    }
    samples_ = bytes_ = 0;
    waited_ = absl::ZeroDuration();
    last_heartbeat_ = absl::Now();
  }
  ClientHeartbeatResponse response;
  SLUICE_RETURN_IF_ERROR(CallUnary(dispatcher_.get(), &::sluice::Dispatcher::Stub::ClientHeartbeat, "client heartbeat",
                                   request, &response, options_.security.token, timeout));
  absl::MutexLock lock(&mu_);
  tasks_.assign(response.tasks().begin(), response.tasks().end());
  expired_streams_.insert(expired_streams_.end(), response.expired_streams().begin(), response.expired_streams().end());
  return absl::OkStatus();
}

std::vector<uint64_t> DistributedInput::TakeExpiredStreams() {
  absl::MutexLock lock(&mu_);
  return std::exchange(expired_streams_, {});
}

std::vector<TaskInfo> DistributedInput::Tasks() const {
  absl::MutexLock lock(&mu_);
  return tasks_;
}

std::shared_ptr<grpc::Channel> DistributedInput::ChannelTo(const std::string& address) {
  absl::MutexLock lock(&mu_);
  std::shared_ptr<grpc::Channel>& channel = channels_[address];
  if (!channel) {
    absl::StatusOr<std::shared_ptr<grpc::Channel>> made = MakeChannel(address, options_.security);
    if (made.ok()) channel = *made;  // credentials were checked when connecting
  }
  return channel;
}

std::unique_ptr<grpc::ClientReader<ReceivingBatch>> DistributedInput::OpenStream(const std::string& address,
                                                                                 uint64_t epoch,
                                                                                 StreamBatchesRequest request,
                                                                                 grpc::ClientContext* context,
                                                                                 std::shared_ptr<ShmRing>* ring) {
  std::shared_ptr<grpc::Channel> channel = ChannelTo(address);
  AddToken(context, options_.security.token);
  request.set_job_id(job_id_);
  request.set_client_id(client_id_);
  request.set_epoch(epoch);
  request.set_pipeline_id(pipeline_id_);
  request.set_mode(options_.mode);
  request.set_compression(options_.compression);
  // A worker on this host writes into the ring; one elsewhere cannot open it.
  if (options_.compression == COMPRESSION_NONE && AddressIsOnThisHost(address)) *ring = TakeRing();
  if (*ring != nullptr) {
    request.set_shm_ring((*ring)->name());
    request.set_shm_session((*ring)->Offer());
  }
  // The generated stub would parse BatchMessages; the readers parse
  // ReceivingBatches (see wire_batch.h) from the same method.
  static const std::string method = absl::StrCat("/", ::sluice::Worker::service_full_name(), "/StreamBatches");
  const grpc::internal::RpcMethod rpc(method.c_str(), grpc::internal::RpcMethod::SERVER_STREAMING, channel);
  return std::unique_ptr<grpc::ClientReader<ReceivingBatch>>(
      grpc::internal::ClientReaderFactory<ReceivingBatch>::Create(channel.get(), rpc, context, request));
}

void DistributedInput::ReportSplits(uint64_t epoch, const std::vector<int64_t>& completed,
                                    const std::vector<int64_t>& abandoned, uint64_t ended_stream, bool dropped,
                                    const std::string& broken_why) {
  ReportSplitsRequest request;
  request.set_job_id(job_id_);
  request.set_client_id(client_id_);
  request.set_epoch(epoch);
  for (int64_t s : completed) request.add_completed(s);
  for (int64_t s : abandoned) request.add_abandoned(s);
  if (ended_stream != 0 && dropped) request.add_dropped_streams(ended_stream);
  if (ended_stream != 0 && !dropped) {
    request.add_broken_streams(ended_stream);
    request.set_broken_why(broken_why);
  }
  absl::MutexLock lock(&mu_);
  reports_.push_back(std::move(request));
  ++unsent_reports_;
}

void DistributedInput::CountWait(absl::Duration waited) {
  absl::MutexLock lock(&mu_);
  waited_ += waited;
}

void DistributedInput::CountReceived(int64_t samples, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  samples_ += samples;
  bytes_ += bytes;
}

std::shared_ptr<ShmRing> DistributedInput::TakeRing() {
  size_t bytes = 0;
  {
    absl::MutexLock lock(&mu_);
    if (ring_bytes_ == 0 || rings_failed_) return nullptr;
    if (!idle_rings_.empty()) {
      std::shared_ptr<ShmRing> ring = std::move(idle_rings_.back());
      idle_rings_.pop_back();
      return ring;
    }
    if (!RingFits()) return nullptr;
    ++rings_held_;  // before it is made: streams opening at once must see it
    bytes = ring_bytes_;
    if (held_changed_) held_changed_(rings_held_ * static_cast<int64_t>(bytes));
  }
  // Outside the lock: reserving the ring's pages takes ~20 ms, which the
  // heartbeat and the other streams need not wait for.
  absl::StatusOr<std::shared_ptr<ShmRing>> made = ShmRing::Create(bytes);
  if (made.ok()) return *std::move(made);
  absl::MutexLock lock(&mu_);
  --rings_held_;
  if (held_changed_) held_changed_(rings_held_ * static_cast<int64_t>(ring_bytes_));
  if (!rings_failed_) {
    rings_failed_ = true;
    Log("client", absl::StrCat(made.status().message(), "; workers on this host send over TCP instead"));
  }
  return nullptr;
}

void DistributedInput::ReturnRing(std::shared_ptr<ShmRing> ring) {
  if (ring == nullptr) return;
  const bool reusable = ring->Reclaim();
  absl::MutexLock lock(&mu_);
  if (reusable) {
    idle_rings_.push_back(std::move(ring));
  } else {
    --rings_held_;  // unmapped when the last batch viewing it goes
    if (held_changed_) held_changed_(rings_held_ * static_cast<int64_t>(ring_bytes_));
  }
}

size_t DistributedInput::BatchBytes() const {
  size_t row = 0;
  for (const ColumnSpec& c : schema_.columns()) row += static_cast<size_t>(c.row_bytes());
  return element_.batched() ? row * static_cast<size_t>(std::max<int64_t>(element_.batch_size(), 1)) : row;
}

// Rings take at most their share of the budget (LimitHeldBytes); a
// stream that finds no room gets its batches over TCP.
bool DistributedInput::RingFits() {
  const int64_t after = (rings_held_ + 1) * static_cast<int64_t>(ring_bytes_);
  if (held_limit_ <= 0 || after <= held_limit_) return true;
  if (!rings_limited_) {
    rings_limited_ = true;
    Log("client", absl::StrCat("job ", job_id_, ": a shared-memory ring of ", ring_bytes_ >> 20,
                               " MiB more would pass ", held_limit_ >> 20,
                               " MiB, half of memory_budget_bytes: a stream of a worker on this "
                               "host comes over TCP instead (raise the budget, or lower shared_memory_mb)"));
  }
  return false;
}

void DistributedInput::LimitHeldBytes(int64_t bytes, std::function<void(int64_t)> held_changed) {
  absl::MutexLock lock(&mu_);
  held_limit_ = bytes;
  held_changed_ = std::move(held_changed);
  // A ring sized by the batches (3 of them) shrinks to the share: a ring
  // of two large batches still saves their copies over TCP. One that would
  // not hold two is none: its batches would all come over TCP anyway.
  if (options_.shared_memory_auto && bytes > 0 && ring_bytes_ > static_cast<size_t>(bytes)) {
    ring_bytes_ = static_cast<size_t>(bytes) >= 2 * BatchBytes() ? static_cast<size_t>(bytes) : 0;
  }
}

int64_t DistributedInput::HeldBytes() const {
  absl::MutexLock lock(&mu_);
  return rings_held_ * static_cast<int64_t>(ring_bytes_);
}

void DistributedInput::Opened(EpochReader* reader, uint64_t epoch) {
  absl::MutexLock lock(&readers_mu_);
  EpochReader*& open = readers_[epoch];
  // Held while superseding: the older reader's destructor waits in Closed.
  if (open != nullptr) open->Supersede();
  open = reader;
}

void DistributedInput::Closed(EpochReader* reader, uint64_t epoch,
                              const std::optional<std::vector<uint64_t>>& leaving) {
  absl::MutexLock lock(&readers_mu_);
  auto it = readers_.find(epoch);
  if (it == readers_.end() || it->second != reader) return;  // a newer reader of the epoch goes on
  readers_.erase(it);
  if (!leaving) return;
  ReportSplitsRequest request;
  request.set_job_id(job_id_);
  request.set_client_id(client_id_);
  request.set_epoch(epoch);
  request.set_left_epoch(true);
  for (uint64_t stream : *leaving) request.add_dropped_streams(stream);
  absl::MutexLock reports(&mu_);
  reports_.push_back(std::move(request));
  ++unsent_reports_;
}

namespace {

// An epoch this consumer already read from its start: the job hands each
// epoch's splits out once, so reading it again would end at once, empty.
class ReadAgainIterator : public exec::Iterator {
 public:
  explicit ReadAgainIterator(absl::Status error) : error_(std::move(error)) {}
  absl::Status GetNext(Batch*, bool*) override { return error_; }

 private:
  const absl::Status error_;
};

}  // namespace

std::unique_ptr<exec::Iterator> DistributedInput::Open(exec::ExecContext* ctx, const graph::CompiledNode& node,
                                                       uint64_t epoch) {
  // parallel_epochs (and a rank's stream) runs each epoch whole per read.
  if (options_.mode == DISTRIBUTED_EPOCH && !sharding_ && ctx->ResumeOf(epoch) == nullptr) {
    absl::MutexLock lock(&readers_mu_);
    if (!started_.insert(epoch).second) {
      return std::make_unique<ReadAgainIterator>(absl::FailedPreconditionError(absl::StrCat(
          "node 'distribute': epoch ", epoch, " of this pipeline's job at dispatcher ", options_.dispatcher,
          " was read already; a job hands out each epoch's samples once. Iterate the next epoch (a pass without "
          "an epoch number), or make the pipeline again for a job of its own")));
    }
  }
  epoch_ = epoch;
  if (sharding_) return std::make_unique<RankStreamReader>(this, ctx, node, epoch);
  return std::make_unique<EpochReader>(this, ctx, node, epoch);
}

absl::Status DistributedInput::CheckResumable() const {
  if (sharding_) return absl::OkStatus();  // the workers' states come with the batches
  if (options_.mode != DISTRIBUTED_EPOCH) {
    return absl::UnimplementedError(
        "node 'distribute': in parallel_epochs mode every worker runs whole epochs: a "
        "consumer's position cannot be saved (use distributed_epoch)");
  }
  if (static_cast<int64_t>(splits_.size()) != element_.num_splits() || job_uid_.empty()) {
    return absl::UnimplementedError(absl::StrCat("node 'distribute': the dispatcher at ", options_.dispatcher,
                                                 " did not list the pipeline's splits or the job's uid (an older "
                                                 "version?): a consumer's position cannot be saved"));
  }
  return absl::OkStatus();
}

std::vector<int64_t> DistributedInput::SplitIndices(uint64_t epoch) const {
  return EpochSplitIndices(element_, workers_part_, epoch);
}

std::vector<io::Split> DistributedInput::SplitOrder(uint64_t epoch) const {
  std::vector<io::Split> order;
  for (int64_t s : SplitIndices(epoch)) order.push_back(splits_[s]);
  return order;
}

void DistributedInput::Identify(exec::EpochPosition* p) const {
  p->remote_job = job_uid_;
  p->remote_client = client_id_;
}

std::vector<EpochSplits::Partial> DistributedInput::PartialSplits(const exec::DoneRows& done) const {
  std::vector<EpochSplits::Partial> out;
  for (size_t s = 0; s < splits_.size(); ++s) {
    const io::Split& split = splits_[s];
    auto file = done.records.find(split.file);
    if (file == done.records.end()) continue;
    const bool some = std::any_of(file->second.begin(), file->second.end(), [&split](const auto& range) {
      return range.second > split.begin_record && (split.end_record < 0 || range.first < split.end_record);
    });
    if (some) out.push_back({static_cast<int64_t>(s), done.DonePrefixEnd(split)});
  }
  return out;
}

absl::Status DistributedInput::ResumeClient(uint64_t epoch, const exec::EpochPosition& resumed) {
  ResumeClientRequest request;
  request.set_job_id(job_id_);
  request.set_client_id(client_id_);
  request.set_epoch(epoch);
  request.set_previous_job_uid(resumed.remote_job);
  request.set_previous_client_id(resumed.remote_client);
  const std::vector<int64_t> order = SplitIndices(epoch);
  const exec::DoneRows& done = *resumed.done;
  for (size_t pos = 0; pos < order.size(); ++pos) {
    if (done.SplitDone(static_cast<int64_t>(pos))) request.add_done(order[pos]);
  }
  for (const EpochSplits::Partial& p : PartialSplits(done)) {
    request.add_partial(p.split);
    request.add_partial_from(p.first_record);
  }
  // A restarting dispatcher is waited for, as when connecting; and reports
  // of an earlier reader of this client must not land after the resume.
  const absl::Time give_up = absl::Now() + options_.connect_timeout;
  {
    absl::MutexLock lock(&mu_);
    const absl::Condition sent(
        +[](DistributedInput* in)
             ABSL_NO_THREAD_SAFETY_ANALYSIS { return in->unsent_reports_ == 0 || !in->fatal_.ok(); },
        this);
    if (!mu_.AwaitWithDeadline(sent, give_up)) {
      return absl::DeadlineExceededError(absl::StrCat("the dispatcher at ", options_.dispatcher,
                                                      " took no split reports for ",
                                                      absl::FormatDuration(options_.connect_timeout)));
    }
    if (!fatal_.ok()) return fatal_;
  }
  Backoff backoff(absl::Milliseconds(100), absl::Seconds(2));
  while (true) {
    ResumeClientResponse ignored;
    absl::Status s = CallUnary(dispatcher_.get(), &::sluice::Dispatcher::Stub::ResumeClient, "resume client", request,
                               &ignored, options_.security.token);
    if (!ServerAway(s) || absl::Now() > give_up) return s;
    absl::SleepFor(backoff.Next());
  }
}

int64_t DistributedInput::Cardinality() const {
  // A rank's stream (a shard before the node) is one worker's pass; in
  // parallel_epochs mode otherwise an epoch is a pass of each worker.
  return options_.mode == DISTRIBUTED_EPOCH || sharding_ ? element_.cardinality() : -1;
}

}  // namespace sluice::service
