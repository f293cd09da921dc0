#include "test_cluster.h"

#include <grpcpp/grpcpp.h>

#include <cstdlib>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "service.grpc.pb.h"

namespace sluice::testing {

namespace {

absl::StatusOr<std::unique_ptr<ServiceProcess>> StartSluice(const std::vector<std::string>& args) {
  const char* bin = std::getenv("SLUICE_BIN");
  if (bin == nullptr) return absl::FailedPreconditionError("SLUICE_BIN is not set");
  return ServiceProcess::Start(bin, args);
}

}  // namespace

absl::Status TestCluster::StartDispatcher(const std::string& work_dir, int port,
                                          const std::vector<std::string>& flags) {
  std::vector<std::string> args{"dispatcher",         "--host",           "127.0.0.1", "--port",
                                std::to_string(port), "--worker-timeout", "2"};
  if (!work_dir.empty()) args.insert(args.end(), {"--work-dir", work_dir});
  args.insert(args.end(), flags_.begin(), flags_.end());
  args.insert(args.end(), flags.begin(), flags.end());
  auto started = StartSluice(args);
  if (!started.ok()) return started.status();
  dispatcher_ = *std::move(started);
  dispatcher_port_ = dispatcher_->port();
  return absl::OkStatus();
}

absl::Status TestCluster::AddWorker(int threads, const std::vector<std::string>& flags) {
  std::vector<std::string> args{"worker",    "--dispatcher",         address(), "--host", "127.0.0.1",
                                "--threads", std::to_string(threads)};
  args.insert(args.end(), flags_.begin(), flags_.end());
  args.insert(args.end(), flags.begin(), flags.end());
  auto started = StartSluice(args);
  if (!started.ok()) return started.status();
  workers_.push_back(*std::move(started));
  return absl::OkStatus();
}

absl::Status TestCluster::RestartDispatcher(int signal, const std::string& work_dir, absl::Duration outage) {
  dispatcher_->Stop(signal);
  absl::SleepFor(outage);
  return StartDispatcher(work_dir, dispatcher_port_);
}

WorkerStatus StatusOf(const ServiceProcess& worker) {
  auto stub = ::sluice::Worker::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(worker.port()), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  WorkerStatus status;
  EXPECT_TRUE(stub->GetStatus(&context, GetStatusRequest(), &status).ok());
  return status;
}

}  // namespace sluice::testing
