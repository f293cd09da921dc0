// sluice-bench service: the preprocessing service on 127.0.0.1 against
//  - a bare C++ gRPC server-streaming loop of the same messages (bytes/s),
//  - the Python gRPC data feed of the articles (W1, bench/peers/w1_grpc_feed.py),
//  - tf.data service with the same split point (W2, w2_tfdata_service.py),
// plus the client's CPU time per sample against running W2 in-process, and
// the time from client start to the first batch. The stream and the
// client's CPU are measured twice: through the local worker's
// shared-memory ring (the default on one host) and over TCP alone (what a
// remote worker's batches take). One dispatcher process and
// one worker process serve every measurement, so this process's CPU time is
// the client's alone (a trainer does not host the dispatcher); the bare
// loop's server is a process of its own too.
#include <grpcpp/grpcpp.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench_util.h"
#include "nlohmann/json.hpp"
#include "service.grpc.pb.h"
#include "sluice/cli/pipeline_runner.h"
#include "sluice/cli/progress.h"
#include "sluice/cli/serve.h"
#include "sluice/core/batch_builder.h"
#include "sluice/core/heap_reuse.h"
#include "sluice/core/status_macros.h"
#include "sluice/pipeline_builder.h"
#include "sluice/service/batch_codec.h"
#include "sluice/service/channel.h"
#include "sluice/service/distributed_pipeline.h"
#include "sluice/service/grpc_status.h"
#include "sluice/service/local_cluster.h"
#include "sluice/service/security.h"
#include "sluice/service/server_process.h"
#include "workloads.h"

namespace sluice::bench {
namespace {

using Clock = std::chrono::steady_clock;

// The streaming payload: 1 MiB batches of 16 rows of 64 KiB, 32 in the
// blob (a pipeline definition carries its arrays: at most 64 MiB). Both
// sides send kPerStream batches a stream: the bare loop per call, the
// service per epoch (the blob repeated). With 32-batch epochs against
// calls of 256, the service paid its stream start (first batch 0.6 ms
// after the epoch opens, ~0.4 of it the batch's transfer) 8 times as often:
// 86% of the bare loop against 92% (2-core EPYC, 12 runs each, interleaved).
constexpr int64_t kRowBytes = 64 << 10;
constexpr int64_t kRows = 512;
constexpr int64_t kBatchRows = 16;
constexpr int64_t kPerStream = 256;

std::vector<uint8_t> Blob() {
  std::vector<uint8_t> blob(static_cast<size_t>(kRows * kRowBytes));
  for (size_t i = 0; i < blob.size(); ++i) blob[i] = static_cast<uint8_t>(i * 2654435761u >> 24);
  return blob;
}

// The node list of `def` with a distribute node (naming `dispatcher`)
// inserted at `index`.
PipelineDef WithDistribute(PipelineDef def, int index, const std::string& dispatcher,
                           const std::string& mode = "distributed_epoch") {
  NodeDef node;
  node.mutable_distribute()->set_dispatcher(dispatcher);
  node.mutable_distribute()->set_mode(mode);
  def.mutable_nodes()->Add(std::move(node));
  for (int i = def.nodes_size() - 1; i > index; --i) def.mutable_nodes()->SwapElements(i, i - 1);
  return def;
}

// The bare gRPC loop: the blob's batches, in order, `count` messages per
// call (the service's stream sends the same batches).
class RawStream final : public ::sluice::Worker::Service {
 public:
  RawStream(std::vector<BatchMessage> messages, int count) : messages_(std::move(messages)), count_(count) {}
  grpc::Status StreamBatches(grpc::ServerContext*, const StreamBatchesRequest*,
                             grpc::ServerWriter<BatchMessage>* writer) override {
    for (int i = 0; i < count_; ++i) {
      if (!writer->Write(messages_[i % messages_.size()])) break;
    }
    return grpc::Status::OK;
  }

 private:
  const std::vector<BatchMessage> messages_;
  const int count_;
};

// The blob's 16-row batches, encoded: what the bare loop sends.
absl::StatusOr<std::vector<BatchMessage>> RawMessages(const std::vector<uint8_t>& blob) {
  std::vector<BatchMessage> messages(kRows / kBatchRows);
  for (size_t i = 0; i < messages.size(); ++i) {
    BatchBuilder b(Schema({ColumnSpec{"blob", DType::kUInt8, Shape{kRowBytes}}}), kBatchRows);
    std::memcpy(b.dense(0), blob.data() + i * kBatchRows * kRowBytes, kBatchRows * kRowBytes);
    b.provenance().AddRun(0, 0, static_cast<int64_t>(i) * kBatchRows);
    b.AddRows(kBatchRows);
    SLUICE_RETURN_IF_ERROR(service::EncodeBatch(b.Finish(), COMPRESSION_NONE, &messages[i]));
  }
  return messages;
}

// Payload bytes/s of the bare loop's stream, read (and parsed) by a client
// in this process as the service's client reads the workers'.
absl::StatusOr<double> RawGrpcBytesPerSecond(int port, int64_t payload, double seconds) {
  SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<grpc::Channel> channel,
                          service::MakeChannel(absl::StrCat("127.0.0.1:", port), {}));
  auto stub = ::sluice::Worker::NewStub(channel);
  int64_t bytes = 0;
  Clock::time_point start;
  bool started = false;
  double elapsed = 0;
  while (elapsed < seconds) {
    grpc::ClientContext context;
    auto reader = stub->StreamBatches(&context, StreamBatchesRequest());
    BatchMessage got;
    while (reader->Read(&got)) {
      if (!started) {  // timed from the first message, as the service is
        start = Clock::now();
        started = true;
        continue;
      }
      bytes += payload;
    }
    SLUICE_RETURN_IF_ERROR(service::FromGrpc(reader->Finish(), "raw stream"));
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  }
  return bytes / elapsed;
}

double CpuSeconds() {
  rusage u;
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec * 1e-6;
}

struct Timed {
  RunReport report;
  double cpu_s_per_million = 0;  // this process's CPU seconds per 1M samples
  double create_ms = 0;          // pipeline creation (joining the service)
};

absl::StatusOr<Timed> RunFor(const PipelineDef& def, double seconds) {
  Timed t;
  const Clock::time_point t0 = Clock::now();
  SLUICE_ASSIGN_OR_RETURN(std::shared_ptr<placement::PlacedPipeline> pipeline, placement::PlacedPipeline::Create(def));
  t.create_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  RunOptions options;
  options.epochs = 1;
  options.min_seconds = seconds;
  options.progress = false;
  const double cpu0 = CpuSeconds();
  SLUICE_ASSIGN_OR_RETURN(t.report, RunPipeline(*pipeline, options));
  t.cpu_s_per_million = (CpuSeconds() - cpu0) / t.report.samples * 1e6;
  return t;
}

// What one transport (a local worker's shared-memory ring, or TCP alone)
// gives; each run's ratios of the two sides, measured back to back.
struct TransportFigures {
  std::vector<double> stream_bytes, vs_raw, cpu_uint8, cpu_float, share_uint8, share_float;

  nlohmann::json Json() const {
    nlohmann::json j;
    j["stream_bytes_per_s"] = Median(stream_bytes);
    j["vs_raw"] = Median(vs_raw);
    if (cpu_uint8.empty()) return j;  // --stream-only
    j["client_cpu_s_per_million"] = Median(cpu_uint8);
    j["client_cpu_share"] = Median(share_uint8);
    j["client_cpu_s_per_million_float32_wire"] = Median(cpu_float);
    j["client_cpu_share_float32_wire"] = Median(share_float);
    return j;
  }
};

struct Figures {
  TransportFigures ring, tcp;
  std::vector<double> raw_bytes, w1_service, python_feed, w2_service, tfdata_service, cpu_in_process, first_batch_ms;
  std::vector<double> vs_feed, vs_tfs;
};

// `def`, with `tcp` its workers' batches sent over TCP even from a local
// worker.
PipelineDef Over(bool tcp, PipelineDef def) {
  for (NodeDef& node : *def.mutable_nodes()) {
    if (tcp && node.has_distribute()) node.mutable_distribute()->set_shared_memory_mb(-1);
  }
  return def;
}

nlohmann::json OrNull(double v) { return v > 0 ? nlohmann::json(v) : nlohmann::json(nullptr); }

}  // namespace

// `sluice-bench raw-stream-server`: the bare loop's server, in a process of
// its own as the worker is.
absl::Status ServeRawStream() {
  ReuseFreedHeapMemory();  // as the worker does
  SLUICE_ASSIGN_OR_RETURN(std::vector<BatchMessage> messages, RawMessages(Blob()));
  RawStream service(std::move(messages), kPerStream);
  cli::BlockTerminationSignals();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  builder.SetMaxSendMessageSize(service::kMaxMessageBytes);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) return absl::UnavailableError("raw stream server: cannot listen");
  std::printf("raw stream listening on port %d\n", port);
  std::fflush(stdout);
  cli::WaitForTermination();
  server->Shutdown();
  return absl::OkStatus();
}

namespace {

// The service's processes (a dispatcher, one worker, the bare loop's
// server) and the pipelines each run measures, side by side.
class ServiceBench {
 public:
  explicit ServiceBench(const BenchArgs& args) : args_(args) {}

  absl::Status Start() {
    SLUICE_ASSIGN_OR_RETURN(const std::string sluice, service::FindSluiceBinary(""));
    SLUICE_ASSIGN_OR_RETURN(const std::string self, SelfPath());
    SLUICE_ASSIGN_OR_RETURN(dispatcher_process_, service::ServerProcess::Start(sluice, {"dispatcher"}));
    const std::string dispatcher = absl::StrCat("127.0.0.1:", dispatcher_process_->port());
    SLUICE_ASSIGN_OR_RETURN(worker_, service::ServerProcess::Start(sluice, {"worker", "--dispatcher", dispatcher}));
    SLUICE_ASSIGN_OR_RETURN(raw_server_, service::ServerProcess::Start(self, {"raw-stream-server"}));
    // Streaming pre-made batches.
    stream_ = WithDistribute(PipelineBuilder::Arrays({MakeArrayColumn("blob", {kRowBytes}, Blob())})
                                 .Repeat(kPerStream * kBatchRows / kRows)
                                 .Batch(kBatchRows)
                                 .Build(),
                             3, dispatcher, "parallel_epochs");
    // Where the worker batches too (drop_remainder), parallel_epochs: with
    // one worker that is the epoch once, batched across it as in-process
    // (distributed_epoch refuses such a batch: it cuts it from each split).
    w1_ = WithDistribute(W1Pipeline(args_.data + "/mnist"), 3, dispatcher, "parallel_epochs");
    w2_local_ = W2Pipeline(args_.data + "/cifar10");
    w2_prefix_ = WithDistribute(w2_local_, 2, dispatcher);
    w2_offloaded_ = WithDistribute(w2_local_, w2_local_.nodes_size() - 1, dispatcher, "parallel_epochs");
    DistributeOptions to_dispatcher;
    to_dispatcher.dispatcher = dispatcher;
    to_dispatcher.mode = "parallel_epochs";
    w2_uint8_wire_ = W2Uint8OverTheWire(args_.data + "/cifar10", to_dispatcher);
    PreparePeers();
    return absl::OkStatus();
  }

  absl::Status Run(int run) {
    SLUICE_ASSIGN_OR_RETURN(const double raw,
                            RawGrpcBytesPerSecond(raw_server_->port(), kBatchRows * kRowBytes, args_.seconds));
    f_.raw_bytes.push_back(raw);
    for (const bool tcp : {false, true}) {
      TransportFigures& t = tcp ? f_.tcp : f_.ring;
      SLUICE_ASSIGN_OR_RETURN(Timed stream, RunFor(Over(tcp, stream_), args_.seconds));
      t.stream_bytes.push_back(stream.report.samples_per_s * kRowBytes);
      t.vs_raw.push_back(t.stream_bytes.back() / raw);
    }
    std::string line =
        absl::StrFormat("run %d/%d: stream %.0f MB/s through shared memory, %.0f over TCP (raw gRPC %.0f)", run,
                        args_.runs, f_.ring.stream_bytes.back() / 1e6, f_.tcp.stream_bytes.back() / 1e6, raw / 1e6);
    if (!args_.stream_only) {
      SLUICE_RETURN_IF_ERROR(RunOffloaded());
      SLUICE_RETURN_IF_ERROR(RunWorkloads());
      absl::StrAppend(&line, OffloadLine());
      if (!args_.no_peers) RunPeers(&line);
    }
    std::fprintf(stderr, "%s\n", line.c_str());
    return absl::OkStatus();
  }

  void PrintSummary() const;
  void PrintJson() const;

 private:
  void PreparePeers() {
    const std::string peers = PeersDir();
    feed_cmd_ = absl::StrCat("/usr/bin/python3 ", peers, "/w1_grpc_feed.py --data ", args_.data, "/mnist --batches ",
                             args_.peer_batches > 0 ? args_.peer_batches : 10);
    if (args_.no_peers || args_.stream_only) return;
    std::fprintf(stderr, "preparing the tf.data peer's virtual environment (first use installs tensorflow-cpu)\n");
    absl::StatusOr<std::string> py = LastLineOf(peers + "/ensure_peer_venv.sh");
    if (!py.ok()) {
      std::fprintf(stderr, "warning: tf.data service peer unavailable: %s\n",
                   std::string(py.status().message()).c_str());
      return;
    }
    tfs_cmd_ = absl::StrCat(*py, " ", peers, "/w2_tfdata_service.py --data ", args_.data, "/cifar10 --batches ",
                            args_.peer_batches > 0 ? args_.peer_batches : 20);
  }

  // The client's CPU receiving W2 from the worker, against W2 in-process.
  absl::Status RunOffloaded() {
    SLUICE_ASSIGN_OR_RETURN(Timed in_process, RunFor(w2_local_, args_.seconds));
    f_.cpu_in_process.push_back(in_process.cpu_s_per_million);
    for (const bool tcp : {false, true}) {
      TransportFigures& t = tcp ? f_.tcp : f_.ring;
      SLUICE_ASSIGN_OR_RETURN(Timed offloaded, RunFor(Over(tcp, w2_offloaded_), args_.seconds));
      SLUICE_ASSIGN_OR_RETURN(Timed uint8_wire, RunFor(Over(tcp, w2_uint8_wire_), args_.seconds));
      t.cpu_uint8.push_back(uint8_wire.cpu_s_per_million);
      t.cpu_float.push_back(offloaded.cpu_s_per_million);
      t.share_uint8.push_back(t.cpu_uint8.back() / f_.cpu_in_process.back());
      t.share_float.push_back(t.cpu_float.back() / f_.cpu_in_process.back());
    }
    return absl::OkStatus();
  }

  // W1 and W2's prefix through the service, and W1's first batch.
  absl::Status RunWorkloads() {
    SLUICE_ASSIGN_OR_RETURN(Timed w1_run, RunFor(w1_, args_.seconds));
    SLUICE_ASSIGN_OR_RETURN(Timed w2_run, RunFor(w2_prefix_, args_.seconds));
    f_.w1_service.push_back(w1_run.report.samples_per_s);
    f_.w2_service.push_back(w2_run.report.samples_per_s);
    f_.first_batch_ms.push_back(w1_run.create_ms + w1_run.report.first_batch_ms);
    return absl::OkStatus();
  }

  std::string OffloadLine() const {
    return absl::StrFormat(
        "; W1 %s samples/s; W2 prefix %s; client CPU s/1M samples, uint8 / float32 on the wire: shared memory "
        "%.2f / %.2f, TCP %.2f / %.2f (in-process %.2f); first batch %.0f ms",
        WithCommas(f_.w1_service.back()), WithCommas(f_.w2_service.back()), f_.ring.cpu_uint8.back(),
        f_.ring.cpu_float.back(), f_.tcp.cpu_uint8.back(), f_.tcp.cpu_float.back(), f_.cpu_in_process.back(),
        f_.first_batch_ms.back());
  }

  // The Python gRPC feed (W1) and tf.data service (W2); one that fails is
  // reported and left out.
  void RunPeers(std::string* line) {
    absl::StatusOr<double> feed = RunPeer(feed_cmd_);
    if (feed.ok()) {
      f_.python_feed.push_back(*feed);
      f_.vs_feed.push_back(f_.w1_service.back() / *feed);
      absl::StrAppend(line, "; Python gRPC feed ", WithCommas(*feed));
    } else {
      std::fprintf(stderr, "warning: Python gRPC feed failed: %s\n", std::string(feed.status().message()).c_str());
    }
    if (tfs_cmd_.empty()) return;
    absl::StatusOr<double> tfs = RunPeer(tfs_cmd_);
    if (tfs.ok()) {
      f_.tfdata_service.push_back(*tfs);
      f_.vs_tfs.push_back(f_.w2_service.back() / *tfs);
      absl::StrAppend(line, "; tf.data service ", WithCommas(*tfs));
    } else {
      std::fprintf(stderr, "warning: tf.data service failed: %s\n", std::string(tfs.status().message()).c_str());
    }
  }

  const BenchArgs& args_;
  std::unique_ptr<service::ServerProcess> dispatcher_process_, worker_, raw_server_;
  PipelineDef stream_, w1_, w2_local_, w2_prefix_, w2_offloaded_, w2_uint8_wire_;
  std::string feed_cmd_, tfs_cmd_;
  Figures f_;
};

void ServiceBench::PrintSummary() const {
  std::printf(
      "\nservice on 127.0.0.1 (one local worker process), median of %d runs on %s;\n"
      "ratios are the median of each run's ratio\n",
      args_.runs, MachineDescription().c_str());
  std::printf("  streaming 1 MiB batches, TCP  %10.0f MB/s   raw C++ gRPC loop %.0f MB/s (%.0f%%)\n",
              Median(f_.tcp.stream_bytes) / 1e6, Median(f_.raw_bytes) / 1e6, 100 * Median(f_.tcp.vs_raw));
  std::printf("    through shared memory       %10.0f MB/s   (%.0f%% of the raw loop)\n",
              Median(f_.ring.stream_bytes) / 1e6, 100 * Median(f_.ring.vs_raw));
  if (args_.stream_only) return;
  const double feed = Median(f_.python_feed), tfs = Median(f_.tfdata_service);
  std::printf("  W1 through the service        %10s samples/s", WithCommas(Median(f_.w1_service)).c_str());
  if (feed > 0) std::printf("   Python gRPC feed %s (%.1fx)", WithCommas(feed).c_str(), Median(f_.vs_feed));
  std::printf("\n  W2, prefix on the worker      %10s samples/s", WithCommas(Median(f_.w2_service)).c_str());
  if (tfs > 0) std::printf("   tf.data service %s (%.1fx)", WithCommas(tfs).c_str(), Median(f_.vs_tfs));
  std::printf("\n  client CPU, W2 offloaded, s per 1M samples (in-process: %.2f)\n", Median(f_.cpu_in_process));
  for (const bool tcp : {false, true}) {
    const TransportFigures& t = tcp ? f_.tcp : f_.ring;
    std::printf("    %-13s uint8 on the wire, rescale here %.2f (%.1f%%); float32 on the wire %.2f (%.1f%%)\n",
                tcp ? "TCP" : "shared memory", Median(t.cpu_uint8), 100 * Median(t.share_uint8), Median(t.cpu_float),
                100 * Median(t.share_float));
  }
  std::printf("  client start to first batch   %10.0f ms\n", Median(f_.first_batch_ms));
}

void ServiceBench::PrintJson() const {
  nlohmann::json j;
  j["workload"] = "service";
  j["runs"] = args_.runs;
  j["machine"] = MachineDescription();
  j["raw_grpc_bytes_per_s"] = Median(f_.raw_bytes);
  j["shared_memory"] = f_.ring.Json();
  j["tcp"] = f_.tcp.Json();
  if (!args_.stream_only) {
    j["w1_service_samples_per_s"] = Median(f_.w1_service);
    j["python_feed_samples_per_s"] = OrNull(Median(f_.python_feed));
    j["vs_python_feed"] = OrNull(Median(f_.vs_feed));
    j["w2_service_samples_per_s"] = Median(f_.w2_service);
    j["tfdata_service_samples_per_s"] = OrNull(Median(f_.tfdata_service));
    j["vs_tfdata_service"] = OrNull(Median(f_.vs_tfs));
    j["in_process_cpu_s_per_million"] = Median(f_.cpu_in_process);
    j["first_batch_ms"] = Median(f_.first_batch_ms);
  }
  std::printf("%s\n", j.dump().c_str());
}

}  // namespace

absl::Status BenchService(const BenchArgs& args) {
  SLUICE_RETURN_IF_ERROR(EnsureData(args.data, true, true));
  // The service's client sets this when it connects; set from the start, the
  // bare loop's client gets the same heap.
  ReuseFreedHeapMemory();
  ServiceBench bench(args);
  SLUICE_RETURN_IF_ERROR(bench.Start());
  for (int run = 1; run <= args.runs; ++run) SLUICE_RETURN_IF_ERROR(bench.Run(run));
  bench.PrintSummary();
  if (args.json) bench.PrintJson();
  return absl::OkStatus();
}

}  // namespace sluice::bench
