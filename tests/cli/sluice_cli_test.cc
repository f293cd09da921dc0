// The `sluice` binary end to end, as a user runs it: real processes, real
// files written by make-data.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "temp_dir.h"

namespace sluice::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct Result {
  int exit_code;
  std::string out;  // stdout, then stderr
};

Result Sluice(const std::string& args) {
  const char* bin = std::getenv("SLUICE_BIN");
  testing::TempDir tmp;
  const std::string err = tmp.Join("stderr");
  const std::string command = std::string(bin ? bin : "sluice") + " " + args + " 2>" + err;
  std::FILE* p = ::popen(command.c_str(), "r");
  Result r{-1, ""};
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out += testing::ReadFileBytes(err);
  return r;
}

// The line of `out` that starts with `prefix`, parsed.
nlohmann::json JsonLine(const std::string& out, const std::string& prefix) {
  const size_t start = out.find(prefix);
  if (start == std::string::npos) return nullptr;
  return nlohmann::json::parse(out.substr(start, out.find('\n', start) - start));
}

class SluiceCliTest : public ::testing::Test {
 protected:
  testing::TempDir dir_;
};

TEST_F(SluiceCliTest, MakeDataThenRunReportsEverySample) {
  ASSERT_EQ(Sluice("make-data mnist --out " + dir_.Join("mnist") + " --count 500").exit_code, 0);
  const std::string raw = dir_.Join("mnist/MNIST/raw/");
  testing::WriteFileBytes(dir_.Join("p.json"), R"({
    "seed": 3,
    "nodes": [
      {"source": {"mnist": {"images": ")" + raw + R"(train-images-idx3-ubyte",
                            "labels": ")" + raw + R"(train-labels-idx1-ubyte"}}},
      {"map": {"ops": [{"op": "normalize", "attrs": {"mean": 0.1307, "std": 0.3081, "scale": 0.00392156862745098}},
                       {"op": "gaussian_blur", "attrs": {"ksize": 11, "sigma": [0.1, 2.0]}}]}},
      {"batch": {"size": 64}},
      {"prefetch": {}}]})");
  const Result r = Sluice("run " + dir_.Join("p.json") + " --epochs 2 --threads 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json j = JsonLine(r.out, "{\"pipeline\"");
  EXPECT_EQ(j["samples"], 1000);
  EXPECT_EQ(j["batches"], 16);  // 7 full batches and one of 52, twice
  EXPECT_EQ(j["epochs"], 2);
  EXPECT_GT(j["samples_per_s"].get<double>(), 0);
  EXPECT_EQ(j["peak_rss_mb_after_epoch"].size(), 2u);
}

// One epoch in two processes: the parts add up to the epoch, each says so
// in its JSON line, and --epochs, which a run in parts cannot honour, is
// refused.
TEST_F(SluiceCliTest, AnEpochRunInPartsReportsEachPartAsJson) {
  ASSERT_EQ(Sluice("make-data mnist --out " + dir_.Join("mnist") + " --count 500").exit_code, 0);
  const std::string raw = dir_.Join("mnist/MNIST/raw/");
  testing::WriteFileBytes(dir_.Join("p.json"), R"({"nodes": [
      {"source": {"mnist": {"images": ")" + raw + R"(train-images-idx3-ubyte",
                            "labels": ")" + raw + R"(train-labels-idx1-ubyte"}}},
      {"batch": {"size": 64}}]})");
  const std::string run = "run " + dir_.Join("p.json") + " --quiet --json ";
  const std::string state = dir_.Join("state.bin");
  Result r = Sluice(run + "--stop-after 3 --save-state " + state);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  nlohmann::json j = JsonLine(r.out, "{\"elements\"");
  EXPECT_EQ(j["samples"], 192);
  EXPECT_EQ(j["epoch_ended"], false);
  EXPECT_GT(j["state_bytes"].get<int>(), 0);
  r = Sluice(run + "--resume " + state);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  j = JsonLine(r.out, "{\"elements\"");
  EXPECT_EQ(j["samples"], 500 - 192);
  EXPECT_EQ(j["epoch_ended"], true);
  r = Sluice(run + "--resume " + state + " --epochs 2");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("--epochs with --stop-after or --resume"));
}

TEST_F(SluiceCliTest, InvalidPipelineExitsNonZeroNamingTheProblem) {
  testing::WriteFileBytes(dir_.Join("bad.json"), R"({"nodes": [{"batch": {"size": "big"}}]})");
  Result r = Sluice("run " + dir_.Join("bad.json"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("(nodes[0].batch.size)"));
  testing::WriteFileBytes(dir_.Join("glob.json"), R"({"nodes": [{"source": {"tfrecord": {"files": [")" +
                                                      dir_.Join("none-*.tfrecord") + R"("]}}}]})");
  r = Sluice("run " + dir_.Join("glob.json"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("NOT_FOUND"));
  EXPECT_THAT(r.out, HasSubstr("no file matches pattern '" + dir_.Join("none-*.tfrecord") + "'"));
}

// Servers listen on loopback unless told; beyond it they need TLS and a
// token, or --insecure, which warns.
TEST_F(SluiceCliTest, ServersRefuseToListenBeyondLoopbackUnprotected) {
  for (const std::string server : {"dispatcher", "worker --dispatcher 127.0.0.1:1"}) {
    const Result r = Sluice(server + " --host 0.0.0.0 --port 0");
    EXPECT_EQ(r.exit_code, 1) << server;
    EXPECT_THAT(r.out, HasSubstr("--host 0.0.0.0 listens beyond this machine without TLS or a token"));
    EXPECT_THAT(r.out, HasSubstr("or --insecure on a network you trust"));
  }
  testing::WriteFileBytes(dir_.Join("token"), "s3cret\n");
  const Result token_only = Sluice("dispatcher --host 0.0.0.0 --port 0 --token-file " + dir_.Join("token"));
  EXPECT_EQ(token_only.exit_code, 1);
  EXPECT_THAT(token_only.out, HasSubstr("without TLS:"));
  const Result help = Sluice("dispatcher --help");
  EXPECT_THAT(help.out, HasSubstr("=127.0.0.1"));
}

TEST_F(SluiceCliTest, InspectIndexAndCorruption) {
  ASSERT_EQ(Sluice("make-data cifar10 --out " + dir_.path() + " --count 30 --files 2").exit_code, 0);
  const std::string file = dir_.Join("train-00000-of-00002.tfrecord");
  Result r = Sluice("inspect " + file + " --json --limit 2");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("15 records, all CRCs valid"));
  const nlohmann::json rec = JsonLine(r.out, "{\"index\": 1");
  ASSERT_FALSE(rec.is_null()) << r.out;
  EXPECT_GT(rec["offset"].get<int64_t>(), 0);
  EXPECT_TRUE(rec["example"]["features"]["feature"].contains("label"));

  r = Sluice("index " + dir_.Join("*.tfrecord"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("15 records -> " + file + ".index"));

  testing::IncrementByte(file, 40);
  r = Sluice("inspect " + file + " --limit 0");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("DATA_LOSS"));
  EXPECT_THAT(r.out, HasSubstr("in " + file + " at offset 0"));
}

TEST_F(SluiceCliTest, InspectIdxAndCifarBinary) {
  ASSERT_EQ(Sluice("make-data mnist --out " + dir_.path() + " --count 12").exit_code, 0);
  Result r = Sluice("inspect " + dir_.Join("MNIST/raw/train-labels-idx1-ubyte"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("IDX uint8, shape [12]"));
  ASSERT_EQ(Sluice("make-data cifar10 --format bin --out " + dir_.Join("bin") + " --count 4 --files 1").exit_code, 0);
  r = Sluice("inspect " + dir_.Join("bin/data_batch_1.bin"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("CIFAR-10 binary, 4 records"));
  testing::WriteFileBytes(dir_.Join("junk.bin"), "not a dataset");
  r = Sluice("inspect " + dir_.Join("junk.bin"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("cannot tell the format"));
}

TEST_F(SluiceCliTest, OpsListsDocsAndDefaults) {
  const Result r = Sluice("ops gaussian_blur");
  ASSERT_EQ(r.exit_code, 0);
  // "[cpu; random]", or "[cpu, cuda; random]" in a CUDA build.
  EXPECT_THAT(r.out, HasSubstr("gaussian_blur  [cpu"));
  EXPECT_THAT(r.out, HasSubstr("; random]"));
  EXPECT_THAT(r.out, HasSubstr("ksize"));
  EXPECT_THAT(r.out, HasSubstr("= 3"));
  EXPECT_THAT(r.out, HasSubstr("(1 or 2 values, each > 0)"));
  EXPECT_EQ(Sluice("ops no_such_op").exit_code, 1);
}

TEST_F(SluiceCliTest, APluginsOpsAreListedAndRunOnlyWhereThePluginIsLoaded) {
  const std::string plugin = std::getenv("SLUICE_EXAMPLE_PLUGIN");
  Result r = Sluice("ops random_cutout --plugin " + plugin);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("random_cutout  [cpu; random; from "));
  EXPECT_THAT(r.out, HasSubstr("libsluice_cutout.so]"));
  // The name after the option is the op's, not a second plugin; the option
  // repeats (the same plugin twice is loaded once).
  r = Sluice("ops --plugin " + plugin + " --plugin " + plugin + " random_cutout");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("random_cutout  [cpu; random; from "));
  ASSERT_EQ(Sluice("make-data cifar10 --out " + dir_.Join("c") + " --count 64 --files 2").exit_code, 0);
  testing::WriteFileBytes(dir_.Join("cutout.json"), R"({
    "nodes": [
      {"source": {"tfrecord": {"files": [")" + dir_.Join("c/*.tfrecord") +
                                                        R"("],
                               "features": [{"name": "image", "dtype": "bytes", "length": 3072},
                                            {"name": "label", "dtype": "int64"}]}}},
      {"map": {"ops": [{"op": "reshape", "attrs": {"shape": [32, 32, 3]}},
                       {"op": "random_cutout", "attrs": {"size": 8}}]}},
      {"batch": {"size": 16}}
    ]})");
  r = Sluice("run " + dir_.Join("cutout.json") + " --plugin " + plugin + " --json --quiet");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(JsonLine(r.out, "{\"pipeline\"")["samples"], 64);
  r = Sluice("run " + dir_.Join("cutout.json"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("unknown op 'random_cutout'"));
  EXPECT_THAT(r.out, HasSubstr("--plugin"));
  r = Sluice("run " + dir_.Join("cutout.json") + " --plugin " + std::getenv("SLUICE_TEST_PLUGINS") +
             "/libtest_plugin_wrong_abi.so");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("libtest_plugin_wrong_abi.so: was built for another sluice"));
}

TEST_F(SluiceCliTest, OpsAsJsonListEveryOpWithItsBackends) {
  const Result r = Sluice("ops --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json ops = nlohmann::json::parse(r.out);
  ASSERT_TRUE(ops.is_array());
  std::set<std::string> names;
  for (const nlohmann::json& op : ops) {
    names.insert(op["name"].get<std::string>());
    EXPECT_FALSE(op["backends"].empty()) << op["name"];
    EXPECT_EQ(op["backends"][0], "cpu") << op["name"];
  }
  EXPECT_TRUE(names.count("gaussian_blur") && names.count("crop_mirror_normalize"));
  EXPECT_FALSE(names.count("fused_warp")) << "internal ops are not listed";
  const nlohmann::json& flip =
      *std::find_if(ops.begin(), ops.end(), [](const nlohmann::json& op) { return op["name"] == "random_flip"; });
  EXPECT_EQ(flip["attrs"][1]["choices"], nlohmann::json({"horizontal", "vertical", "horizontal_and_vertical"}));
  EXPECT_EQ(flip["attrs"][1]["default"], "horizontal");
  for (const nlohmann::json& op : ops) {  // mixup and cutmix may work in place, nothing else does yet
    const bool mix = op["name"] == "mixup" || op["name"] == "cutmix";
    EXPECT_EQ(op["in_place"], mix) << op["name"];
    EXPECT_EQ(op["whole_ranges"], op["name"] == "python") << op["name"];  // a round trip a call
  }
}

TEST_F(SluiceCliTest, ProfileThenMaterializeAsTheVerdictSuggests) {
  ASSERT_EQ(Sluice("make-data cifar10 --out " + dir_.Join("c") + " --count 200 --files 2").exit_code, 0);
  testing::WriteFileBytes(dir_.Join("p.json"), R"({
    "nodes": [
      {"source": {"tfrecord": {"files": [")" + dir_.Join("c") +
                                                   R"(/*.tfrecord"],
        "features": [{"name": "image", "dtype": "bytes", "length": 3072}, {"name": "label", "dtype": "int64"}]}}},
      {"map": {"ops": [{"op": "reshape", "attrs": {"shape": [32, 32, 3]}},
                       {"op": "gaussian_blur", "attrs": {"ksize": 31, "sigma": 6}},
                       {"op": "gaussian_blur", "attrs": {"ksize": 31, "sigma": 6}},
                       {"op": "gaussian_blur", "attrs": {"ksize": 31, "sigma": 6}}]}},
      {"batch": {"size": 20}},
      {"map": {"ops": [{"op": "random_flip"}]}}
    ]})");
  // Three blurs: the bottleneck by far, whatever else runs on the machine
  // while it is measured (one was about half the CPU, and a busy machine
  // could make reading look slower).
  const Result profile = Sluice("profile " + dir_.Join("p.json") + " --seconds 0.6 --no-ablation --report " +
                                dir_.Join("r.html") + " --trace " + dir_.Join("t.json") + " --json");
  ASSERT_EQ(profile.exit_code, 0) << profile.out;
  const nlohmann::json j = JsonLine(profile.out, "{\"autotune\"");
  ASSERT_FALSE(j.is_null()) << profile.out;
  EXPECT_EQ(j["verdict"]["bottleneck"], "gaussian_blur");
  EXPECT_EQ(j["placement"]["mode"], "manual");
  EXPECT_THAT(profile.out, HasSubstr("placement: as written, in the trainer's process"));
  EXPECT_THAT(profile.out, HasSubstr("materialize gaussian_blur, gaussian_blur, gaussian_blur (sluice materialize)"));
  EXPECT_THAT(testing::ReadFileBytes(dir_.Join("r.html")), HasSubstr("gaussian_blur"));
  EXPECT_NO_THROW(nlohmann::json::parse(testing::ReadFileBytes(dir_.Join("t.json"))));

  const Result mat = Sluice("materialize " + dir_.Join("p.json") + " --out " + dir_.Join("m"));
  ASSERT_EQ(mat.exit_code, 0) << mat.out;
  EXPECT_THAT(mat.out, HasSubstr("200 records"));
  // Another process writes the same records, byte for byte (each record's
  // features in one order, not in the order of a per-process hash).
  ASSERT_EQ(Sluice("materialize " + dir_.Join("p.json") + " --out " + dir_.Join("m2")).exit_code, 0);
  int parts = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_.Join("m"))) {
    if (entry.path().extension() != ".tfrecord") continue;
    ++parts;
    const bool same = testing::ReadFileBytes(entry.path().string()) ==
                      testing::ReadFileBytes(dir_.Join("m2/" + entry.path().filename().string()));
    EXPECT_TRUE(same) << entry.path() << " differs from the second run's";
  }
  EXPECT_GT(parts, 0);
  const Result run = Sluice("run " + dir_.Join("m/pipeline.json") + " --json");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_EQ(JsonLine(run.out, "{\"pipeline\"")["samples"], 200);
}

// Under placement "auto", the profile runs the pipeline through its
// placement long enough to judge a move and says what it decided, with the
// last window's numbers behind it.
TEST_F(SluiceCliTest, ProfileSaysWhatPlacementAutoDecided) {
  ASSERT_EQ(Sluice("make-data cifar10 --out " + dir_.Join("c") + " --count 200 --files 2").exit_code, 0);
  testing::WriteFileBytes(dir_.Join("p.json"), R"({
    "options": {"placement": "auto"},
    "nodes": [
      {"source": {"tfrecord": {"files": [")" + dir_.Join("c") +
                                                   R"(/*.tfrecord"],
        "features": [{"name": "image", "dtype": "bytes", "length": 3072}, {"name": "label", "dtype": "int64"}]}}},
      {"map": {"ops": [{"op": "reshape", "attrs": {"shape": [32, 32, 3]}},
                       {"op": "gaussian_blur", "attrs": {"ksize": 5, "sigma": 1}}]}},
      {"batch": {"size": 20}}
    ]})");
  const Result profile = Sluice("profile " + dir_.Join("p.json") + " --seconds 0.5 --no-ablation --json");
  ASSERT_EQ(profile.exit_code, 0) << profile.out;
  const nlohmann::json j = JsonLine(profile.out, "{\"autotune\"");
  ASSERT_FALSE(j.is_null()) << profile.out;
  EXPECT_EQ(j["placement"]["mode"], "auto");
  EXPECT_GT(j["placement"]["last_window"]["samples_per_s"].get<double>(), 0) << profile.out;
  EXPECT_THAT(profile.out, HasSubstr("measuring placement auto for 12 s"));
  EXPECT_THAT(profile.out, HasSubstr("placement: auto, now "));
  EXPECT_THAT(profile.out, HasSubstr("last window: "));
}

TEST_F(SluiceCliTest, ProfileAndMaterializeErrorsNameTheProblem) {
  const Result missing = Sluice("profile " + dir_.Join("none.json"));
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_THAT(missing.out, HasSubstr("none.json"));
  testing::WriteFileBytes(dir_.Join("random.json"), R"({"nodes": [
      {"source": {"arrays": {"columns": [{"name": "x", "dtype": "uint8", "shape": [2, 2], "data": "AAECAwQFBgc="}]}}},
      {"map": {"ops": [{"op": "random_flip", "attrs": {"field": "x"}}]}}]})");
  const Result mat = Sluice("materialize " + dir_.Join("random.json") + " --out " + dir_.Join("m"));
  EXPECT_NE(mat.exit_code, 0);
  EXPECT_THAT(mat.out, HasSubstr("nothing to materialize"));
  // An output it could not write is said before any measuring.
  const Result trace = Sluice("profile " + dir_.Join("random.json") + " --trace " + dir_.Join("no-such-dir/t.json"));
  EXPECT_NE(trace.exit_code, 0);
  EXPECT_THAT(trace.out, HasSubstr("NOT_FOUND: --trace " + dir_.Join("no-such-dir/t.json") +
                                   ": there is no directory " + dir_.Join("no-such-dir")));
  EXPECT_THAT(trace.out, Not(HasSubstr("measuring")));
}

TEST_F(SluiceCliTest, ARunThatYieldsNothingSaysSo) {
  testing::WriteFileBytes(dir_.Join("empty.json"), R"({"nodes": [
      {"source": {"arrays": {"columns": [{"name": "x", "dtype": "uint8", "shape": [2, 2], "data": "AAECAwQFBgc="}]}}},
      {"batch": {"size": 8, "drop_remainder": true}}]})");
  const Result r = Sluice("run " + dir_.Join("empty.json"));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("warning: the pipeline yielded nothing"));
  EXPECT_THAT(r.out, HasSubstr("0 samples in 1 epoch (0 batches), no rate"));
  EXPECT_THAT(r.out, HasSubstr("nothing delivered; peak RSS"));
  // Without a batch node each element is a sample: no count of batches.
  testing::WriteFileBytes(dir_.Join("one.json"), R"({"nodes": [
      {"source": {"arrays": {"columns": [{"name": "x", "dtype": "uint8", "shape": [2, 2], "data": "AAECAwQFBgc="}]}}},
      {"take": {"count": 1}}]})");
  const Result one = Sluice("run " + dir_.Join("one.json"));
  EXPECT_EQ(one.exit_code, 0) << one.out;
  EXPECT_THAT(one.out, HasSubstr("1 sample in 1 epoch, one sample, too few for a rate"));
}

TEST_F(SluiceCliTest, AMistypedCommandIsNamedWithTheCommands) {
  const Result r = Sluice("runn x.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.out, HasSubstr("unknown command 'runn' (commands: make-data, run, profile,"));
}

// Numbers no run can take are refused by name, not met with an abort or
// a silent default.
TEST_F(SluiceCliTest, ImpossibleCountsAreRefusedByName) {
  const Result threads = Sluice("run " + dir_.Join("any.json") + " --threads 99999");
  EXPECT_NE(threads.exit_code, 0);
  EXPECT_THAT(threads.out, HasSubstr("--threads: must be in [0, 1024], got 99999"));
  for (const std::string& flag : {"--count 0", "--count -5", "--classes 0", "--files 0"}) {
    const Result made = Sluice("make-data imagenet --out " + dir_.Join("md") + " " + flag);
    EXPECT_NE(made.exit_code, 0) << flag;
    EXPECT_THAT(made.out, HasSubstr("must be > 0")) << flag;
  }
  // A dispatcher without a port, or past 65535, used to be retried forever.
  for (const std::string& address : {"foo", "127.0.0.1:70000"}) {
    const Result worker = Sluice("worker --dispatcher " + address);
    EXPECT_NE(worker.exit_code, 0) << address;
    EXPECT_THAT(worker.out, HasSubstr("--dispatcher: address '" + address + "'")) << address;
  }
  // A port past 65535 used to wrap (99999 listened on 34463).
  for (const std::string& command :
       {"dispatcher --port 99999", "worker --dispatcher 127.0.0.1:1 --port 65536", "dispatcher --metrics-port 70000"}) {
    const Result port = Sluice(command);
    EXPECT_NE(port.exit_code, 0) << command;
    EXPECT_THAT(port.out, HasSubstr("not in range 0 to 65535")) << command;
  }
}

}  // namespace
}  // namespace sluice::cli
