// Hostile inputs and outputs: inputs are bounded regular files whose content is
// never echoed, nested files cannot recurse, invalid UTF-8 is bad input with a location,
// outputs are all or nothing and never written through a symlink or over an input, and
// the trace keeps every transfer visible.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/cli.h"
#include "core/input_file.h"
#include "core/output_files.h"
#include "scenario/work_estimate.h"
#include "tests/support.h"

namespace pipesim {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A scenario whose model section is `model`, in a fresh directory of its own.
struct Dir {
  std::string path;
  explicit Dir(const std::string& name) : path(test::temp_path(name)) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  std::string file(const std::string& name) const { return path + "/" + name; }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(file(name), std::ios::binary) << text;
    return file(name);
  }
  // Every entry of the directory, sorted: what a failed run must leave unchanged.
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(path)) out.push_back(e.path().filename());
    std::sort(out.begin(), out.end());
    return out;
  }
};

std::string scenario_with_model(const std::string& model) {
  return "cluster: {gpu: v100-16gb, nodes: 1, gpus_per_node: 2, intra_node: nvlink}\n"
         "model: " +
         model +
         "\n"
         "training: {global_batch: 4, micro_batch: 2}\n"
         "strategy: {schedule: dapple, pipeline: 2}\n";
}

const std::string kLayers =
    "layers: [{forward: 1 ms, backward: 2 ms}, {forward: 1 ms, backward: 2 ms}]";

void expect_one_line_error(const test::CliResult& r, const std::string& fragment) {
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(r.err.starts_with("pipesim: error: ")) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(fragment), std::string::npos) << r.err;
}

// ---- inputs ----

TEST(Inputs, AProfileNamingItselfIsACycleNotACrash) {
  // Before: unbounded recursion, SIGSEGV.
  const Dir d("self");
  d.write("p.yaml", "profile: p.yaml\n");
  const auto s = d.write("s.yaml", scenario_with_model("{profile: p.yaml}"));
  expect_one_line_error(test::cli({"run", s}),
                        "cycle: " + s + " -> " + d.file("p.yaml") + " -> " + d.file("p.yaml"));
}

TEST(Inputs, FilesNamingEachOtherAreACycle) {
  const Dir d("pair");
  d.write("a.yaml", "profile: b.yaml\n");
  d.write("b.yaml", "profile: a.yaml\n");
  expect_one_line_error(
      test::cli({"run", d.write("s.yaml", scenario_with_model("{profile: a.yaml}"))}),
      "a.yaml -> " + d.file("b.yaml") + " -> " + d.file("a.yaml"));
  // An include whose model names a profile that names the include again.
  d.write("m.yaml", "profile: n.yaml\n");
  d.write("n.yaml", "profile: m.yaml\n");
  expect_one_line_error(
      test::cli({"run", d.write("i.yaml", scenario_with_model("{include: m.yaml}"))}), "cycle");
}

TEST(Inputs, NestingIsCappedAndNamed) {
  const Dir d("deep");
  for (int i = 1; i <= 5; ++i)
    d.write(fmt::format("n{}.yaml", i), fmt::format("profile: n{}.yaml\n", i + 1));
  d.write("n6.yaml", kLayers + "\n");
  expect_one_line_error(
      test::cli({"run", d.write("s.yaml", scenario_with_model("{profile: n1.yaml}"))}),
      "files nested too deep: " + d.file("s.yaml") + " -> ");
  // Three deep is fine.
  d.write("n3.yaml", kLayers + "\n");
  EXPECT_EQ(test::cli({"run", d.file("s.yaml")}).code, 0);
}

TEST(Inputs, OnlyRegularFilesAreRead) {
  // Before: /dev/zero was read until memory ran out; a FIFO blocked forever.
  const Dir d("special");
  ASSERT_EQ(::mkfifo(d.file("fifo").c_str(), 0600), 0);
  expect_one_line_error(test::cli({"run", d.file("fifo")}), "the scenario file is a FIFO");
  expect_one_line_error(test::cli({"run", "/dev/zero"}), "is a character device (a regular file)");
  expect_one_line_error(test::cli({"run", d.path}), "is a directory");
  const auto s = d.write("s.yaml", scenario_with_model("{profile: fifo}"));
  expect_one_line_error(test::cli({"run", s}),
                        "model.profile: profile file '" + d.file("fifo") + "' is a FIFO");
  expect_one_line_error(
      test::cli({"run", d.write("z.yaml", scenario_with_model("{profile: /dev/zero}"))}),
      "is a character device");
}

TEST(Inputs, SizeIsCapped) {
  const Dir d("big");
  const std::string big = d.file("big.yaml");
  { std::ofstream(big) << "name: x\n"; }
  fs::resize_file(big, static_cast<uintmax_t>(kMaxInputBytes) + 1);  // sparse: no disk used
  expect_one_line_error(test::cli({"run", big}), "too large to read (at most 64 MiB)");
  expect_one_line_error(
      test::cli({"run", d.write("s.yaml", scenario_with_model("{profile: big.yaml}"))}),
      "at most 64 MiB");
}

TEST(Inputs, AForeignFileIsNeverQuoted) {
  // Before: `model: {include: /etc/passwd}` printed the file's first lines.
  const Dir d("foreign");
  d.write("passwd", "root:x:0:0:SECRET-ROOT:/root:/bin/bash\nbin:x:1:1:SECRET-BIN:/bin:\n");
  d.write("keys.yaml", "SECRET_KEY: hunter2\n");
  for (const std::string model : {"{include: ./passwd}", "{include: keys.yaml}",
                                  "{profile: passwd}", "{profile: keys.yaml}"}) {
    const auto r = test::cli({"run", d.write("s.yaml", scenario_with_model(model))});
    EXPECT_EQ(r.code, 2) << model;
    EXPECT_EQ(r.err.find("SECRET"), std::string::npos) << model << ": " << r.err;
    EXPECT_EQ(r.err.find("hunter2"), std::string::npos) << model << ": " << r.err;
  }
  for (const std::string file : {"passwd", "keys.yaml"}) {
    const auto r = test::cli({"run", d.file(file)});
    expect_one_line_error(r, d.file(file) + ":");
    EXPECT_EQ(r.err.find("SECRET"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("hunter2"), std::string::npos) << r.err;
  }
}

TEST(Inputs, InvalidUtf8IsBadInputWithItsLocation) {
  // Before: exit 3, "internal error" (the JSON writer threw on the name).
  const Dir d("utf8");
  const auto s =
      d.write("s.yaml", scenario_with_model("{layers: [{name: \"a\xff\", forward: 1 ms, "
                                            "backward: 2 ms}, {forward: 1 ms, backward: 2 ms}]}"));
  expect_one_line_error(test::cli({"run", s, "--json", "-"}),
                        s + ":2:27: invalid UTF-8 (byte 0xff)");
  expect_one_line_error(test::cli({"run", "--set", "name=x\xc3(", "--json", "-"}), "invalid UTF-8");
  EXPECT_THROW(load_scenario_text("name: \"\xed\xa0\x80\"\n", "t.yaml"),
               InputError);  // a surrogate
  // A scenario file whose name is not UTF-8 names the run with a stand-in character.
  const auto odd = d.write("odd\xff.yaml", scenario_with_model("{" + kLayers + "}"));
  const auto r = test::cli({"run", odd, "--json", "-"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["scenario"], "odd?");
}

TEST(Inputs, Utf8Validator) {
  EXPECT_EQ(invalid_utf8_offset("plain ascii"), std::string_view::npos);
  EXPECT_EQ(invalid_utf8_offset("\xc3\xa9t\xc3\xa9 \xf0\x9f\x98\x80"), std::string_view::npos);
  EXPECT_EQ(invalid_utf8_offset("ab\xc0\xaf"), 2u);        // overlong '/'
  EXPECT_EQ(invalid_utf8_offset("\xe0\x80\xaf"), 0u);      // overlong, 3 bytes
  EXPECT_EQ(invalid_utf8_offset("x\xed\xa0\x80"), 1u);     // surrogate
  EXPECT_EQ(invalid_utf8_offset("\xf4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(invalid_utf8_offset("abc\xe2\x82"), 3u);       // cut short
  EXPECT_EQ(lossy_utf8("a\xff"
                       "b"),
            "a?b");
}

// ---- outputs ----

// A signal while the outputs are written removes every temporary, leaves the existing
// outputs as they were and ends the process with 128 + the signal (130, 143, 129).
TEST(Outputs, ASignalWhileWritingLeavesNothingBehind) {
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) {
    const Dir d("signal-" + std::to_string(sig));
    d.write("r.json", "old");
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      ::signal(sig, SIG_DFL);  // as a shell starts a foreground command
      OutputFiles files;
      files.add("--json", d.file("r.json"), [](std::ostream& o) { o << "new"; });
      files.add("--trace", d.file("t.json"), [](std::ostream& o) {
        for (;;) {  // a trace that takes long to write
          o << std::string(1 << 16, 'x');
          o.flush();
          ::usleep(1000);
        }
      });
      files.commit();
      ::_exit(0);
    }
    // Wait for both temporaries (the first output is complete, the second being written).
    for (int i = 0; i < 2000; ++i) {
      const auto e = d.entries();
      if (std::count_if(e.begin(), e.end(),
                        [](const std::string& n) { return n.ends_with(".tmp"); }) == 2)
        break;
      ::usleep(1000);
    }
    ASSERT_EQ(::kill(child, sig), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status)) << sig;
    EXPECT_EQ(WEXITSTATUS(status), 128 + sig);
    EXPECT_EQ(d.entries(), std::vector<std::string>{"r.json"}) << sig;
    EXPECT_EQ(test::read_file(d.file("r.json")), "old");
  }
}

TEST(Outputs, AnEmptyPathIsAUsageError) {
  // Before: `--json ''` wrote nothing and exited 0.
  expect_one_line_error(test::cli({"run", "--json", ""}), "--json: the output path is empty");
  expect_one_line_error(test::cli({"run", "--trace", ""}), "--trace: the output path is empty");
}

TEST(Outputs, AnInputIsNeverOverwritten) {
  // Before: `--json s.yaml` replaced the scenario and exited 0.
  const Dir d("input");
  const std::string text = scenario_with_model("{profile: p.yaml}");
  const auto s = d.write("s.yaml", text);
  d.write("p.yaml", kLayers + "\n");
  fs::create_symlink(s, d.file("link.json"));
  for (const std::string& out : {s, d.file("p.yaml"), d.file("link.json"), d.path + "/./s.yaml"}) {
    expect_one_line_error(test::cli({"run", s, "--csv", out}),
                          "the output would overwrite the input");
    EXPECT_EQ(test::read_file(s), text);
  }
  EXPECT_EQ(test::read_file(d.file("p.yaml")), kLayers + "\n");
}

TEST(Outputs, ASymlinkAtTheDestinationIsReplacedNotFollowed) {
  // Before: r.json.tmp planted as a symlink got the report written into its target.
  const Dir d("symlink");
  d.write("target", "keep");
  fs::create_symlink(d.file("target"), d.file("r.json"));
  fs::create_symlink(d.file("target"), d.file("r.json.tmp"));  // the old predictable name
  const auto r = test::cli({"run", "--json", d.file("r.json")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(test::read_file(d.file("target")), "keep");
  EXPECT_FALSE(fs::is_symlink(d.file("r.json")));
  EXPECT_TRUE(json::parse(test::read_file(d.file("r.json"))).contains("makespan_s"));
  EXPECT_EQ(d.entries(), (std::vector<std::string>{"r.json", "r.json.tmp", "target"}));
}

TEST(Outputs, OneFailedOutputLeavesNoOther) {
  // Before: `--json r.json --trace no/dir/t.json` left r.json and exited 2.
  const Dir d("partial");
  const auto r = test::cli({"run", "--json", d.file("r.json"), "--csv", d.file("ops.csv"),
                            "--trace", d.file("no/dir/t.json")});
  expect_one_line_error(r, d.file("no/dir/t.json") + ": cannot create the output file");
  EXPECT_TRUE(d.entries().empty());
  // An existing report is left as it was.
  d.write("r.json", "old");
  expect_one_line_error(test::cli({"run", "--json", d.file("r.json"), "--csv", "/dev/full"}),
                        "/dev/full: writing the output failed");
  EXPECT_EQ(test::read_file(d.file("r.json")), "old");
  EXPECT_EQ(d.entries(), std::vector<std::string>{"r.json"});
}

TEST(Outputs, AFullDiskLeavesNothing) {
  // A file size limit stands in for a full disk: the writes fail part-way (EFBIG).
  const Dir d("full");
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  const auto handler = ::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = 64 * 1024;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const auto r = test::cli({"run", "--json", d.file("r.json"), "--trace", d.file("t.json")});
  ::setrlimit(RLIMIT_FSIZE, &old);
  ::signal(SIGXFSZ, handler);
  expect_one_line_error(r, "writing the output file failed");
  EXPECT_TRUE(d.entries().empty());
}

TEST(Outputs, DevicesAreWrittenInPlace) {
  // Before: `--json /dev/null` as root replaced the device node with a file.
  const auto r = test::cli({"run", "--json", "/dev/null", "--csv", "/dev/null"});
  ASSERT_EQ(r.code, 0) << r.err;
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  const Dir d("dir");
  expect_one_line_error(test::cli({"run", "--json", d.path}), "the output path is a directory");
  expect_one_line_error(test::cli({"run", "--json", d.file("a"), "--csv", d.path + "/./a"}),
                        "the same file is also given to --json");
}

// A stream whose every write fails, as std::cout on /dev/full.
class FailingBuf : public std::streambuf {
 protected:
  int_type overflow(int_type) override { return traits_type::eof(); }
};

int run_with_failing_stdout(const std::vector<std::string>& args, std::string& err) {
  std::vector<const char*> argv{"pipesim"};
  for (const auto& a : args) argv.push_back(a.c_str());
  FailingBuf buf;
  std::ostream out(&buf);
  std::ostringstream e;
  const int code = run_cli(static_cast<int>(argv.size()), argv.data(), out, e);
  err = e.str();
  return code;
}

TEST(Outputs, AFailedStandardOutputIsExit2) {
  // Before: `--json - > /dev/full` exited 0.
  const Dir d("stdout");
  std::string err;
  EXPECT_EQ(run_with_failing_stdout({"run", "--json", "-"}, err), 2);
  EXPECT_NE(err.find("<stdout>: writing to standard output failed"), std::string::npos) << err;
  // The summary table likewise, and the report is then not committed either.
  EXPECT_EQ(run_with_failing_stdout({"run", "--json", d.file("r.json")}, err), 2);
  EXPECT_NE(err.find("<stdout>: writing to standard output failed"), std::string::npos) << err;
  EXPECT_TRUE(d.entries().empty());
}

// ---- trace ----

TEST(Trace, NoTwoSlicesOverlapOnATrack) {
  // Before: concurrent flows between two GPUs shared a track and overlapped, and Perfetto
  // dropped 76 transfers of the default scenario at 1 Gbit/s. Every slice on a track must
  // either end before the next starts or nest inside it.
  const Dir d("trace");
  // The default model as a 16-stage pipeline at 1 Gbit/s; and with two data-parallel copies, whose
  // gradient all-reduces share links with the pipeline's transfers.
  const std::vector<std::vector<std::string>> runs{
      {"--set", "strategy={schedule: dapple, pipeline: 16}", "--set",
       "cluster.inter_node.bandwidth=1 Gbit/s"},
      {"--set", "strategy={schedule: dapple, pipeline: 8, data: 2}"}};
  for (size_t k = 0; k < runs.size(); ++k) {
    std::vector<std::string> args{"run", "--trace", d.file("t.json")};
    args.insert(args.end(), runs[k].begin(), runs[k].end());
    const auto r = test::cli(args);
    ASSERT_EQ(r.code, 0) << r.err;
    const json trace = json::parse(test::read_file(d.file("t.json")));
    std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<double, double>>> tracks;
    std::map<std::pair<int64_t, int64_t>, bool> named;
    int transfers = 0, flows = 0;
    for (const auto& e : trace["traceEvents"]) {
      if (e["ph"] == "M" && e["name"] == "thread_name")
        named[{e["pid"].get<int64_t>(), e["tid"].get<int64_t>()}] = true;
      if (e["ph"] == "s") ++flows;
      if (e["ph"] != "X") continue;
      const std::pair<int64_t, int64_t> key{e["pid"].get<int64_t>(), e["tid"].get<int64_t>()};
      tracks[key].push_back(
          {e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>()});
      transfers += e["cat"] == "transfer";
    }
    EXPECT_EQ(transfers, 2 * flows);  // each on its sender's and its receiver's track
    int lanes = 0;
    for (auto& [key, slices] : tracks) {
      EXPECT_TRUE(named[key]) << key.first << "/" << key.second;
      lanes += key.second > 0;
      std::sort(slices.begin(), slices.end(), [](auto a, auto b) {
        return a.first < b.first || (a.first == b.first && a.second > b.second);
      });
      std::vector<double> open;  // ends of the enclosing slices
      for (const auto& [start, end] : slices) {
        while (!open.empty() && open.back() <= start + 1e-9) open.pop_back();
        if (!open.empty()) {
          EXPECT_LE(end, open.back() + 1e-9)
              << "pid " << key.first << " tid " << key.second << ": [" << start << ", " << end
              << "] overlaps a slice ending at " << open.back();
        }
        open.push_back(end);
      }
    }
    EXPECT_GT(lanes, 0);
    // At 1 Gbit/s transfers queue on the inter-node hop: they need more than one lane.
    if (k == 0) {
      EXPECT_NE(test::read_file(d.file("t.json")).find("send node0/gpu7->node1/gpu0 #2"),
                std::string::npos);
    }
  }
}

}  // namespace
}  // namespace pipesim

namespace pipesim {
namespace {

// ---- work estimate ----

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(WorkEstimate, TooMuchWorkIsRefusedAtOnceWithTheEstimateAndTheLimit) {
  // Before: the cap counted compute ops only. A 2,000-way data-parallel ring has few
  // compute ops but 2 x 1999 x 2000 transfers per gradient bucket: 16 stages make 1.3e8
  // ring steps. Compact rings store 2000 ops per ring and simulate it; a run that stores
  // every step (an op CSV) is refused at once.
  auto t0 = std::chrono::steady_clock::now();
  const Dir d("bigcsv");
  auto r = test::cli({"run", "--set", "cluster.nodes=4000", "--set",
                      "strategy={schedule: dapple, pipeline: 16, data: 2000}", "--set",
                      "training.global_batch=4000", "--set", "training.micro_batch=1", "--csv",
                      d.file("ops.csv")});
  expect_one_line_error(r, "strategy: this run would simulate about");
  EXPECT_NE(r.err.find("transfers, collective steps included) (at most 5e+07"), std::string::npos)
      << r.err;
  EXPECT_LT(seconds_since(t0),
            30.0);  // a guard against building it first (minutes), not a timing target
  EXPECT_TRUE(d.entries().empty());
  // 8 stages x 8,000-way rings: at least 8 x 2 x 7999 x 8000 = 1.02e9 steps (more with
  // several gradient buckets per stage), over the flow-step limit even compact.
  t0 = std::chrono::steady_clock::now();
  r = test::cli({"run", "--set", "cluster.nodes=8000", "--set",
                 "strategy={schedule: dapple, pipeline: 8, data: 8000}", "--set",
                 "training.global_batch=8000", "--set", "training.micro_batch=1"});
  expect_one_line_error(r, "strategy: this run would simulate about");
  EXPECT_NE(r.err.find("transfers and collective steps (at most 5e+08"), std::string::npos)
      << r.err;
  EXPECT_LT(seconds_since(t0), 30.0);
  // Before: 12,500 nodes x 8 GPUs were built (5.4 GB) before anything was checked.
  t0 = std::chrono::steady_clock::now();
  expect_one_line_error(
      test::cli({"run", "--set", "cluster.nodes=12500", "--set", "strategy.data=25000"}),
      "cluster.nodes: 12500 x 8 = 100000 GPUs (nodes x gpus_per_node <= 65536)");
  EXPECT_LT(seconds_since(t0), 30.0);
}

TEST(WorkEstimate, ATraceTooLargeIsRefusedBeforeSimulating) {
  // Before: 1.6 M micro-batches with --trace left an 8 GB temporary file.
  const Dir d("bigtrace");
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = test::cli({"run", "--set", "training.global_batch=3200000", "--set",
                            "strategy={schedule: dapple, pipeline: 2}", "--trace", d.file("t.json"),
                            "--json", d.file("r.json")});
  expect_one_line_error(r, "--trace: the trace would be about");
  EXPECT_NE(r.err.find("(at most 4.29 GB"), std::string::npos) << r.err;
  EXPECT_LT(seconds_since(t0), 30.0);
  EXPECT_TRUE(d.entries().empty());
}

TEST(WorkEstimate, CountsEveryKindOfWork) {
  // 2 stages x 2 replicas, 2 copies, M = 64 / (2 x 2) = 16 micro-batches, 1 iteration:
  // compute: 2 copies x 4 devices x (16 x 3 + 1) = 392; pipeline transfers: 2 copies x 16 x
  // 2 directions x 2 x 2 replica pairs = 256; all-reduce per stage of 2 layers of 1M
  // params (8 MB of fp32 gradients, one 25 MiB bucket) among 4 members, ring or tree,
  // whichever is larger: max(2 x 3 x 4, 2 x 2 x 8 x 3) = 96 per stage.
  test::PipeSpec p;
  p.stages = 2;
  p.micro_batches = 16;
  p.replicas = {2, 2};
  p.data = 2;
  p.params = "1M";
  const Scenario s = load_scenario_text(test::to_yaml(p), "w.yaml");
  const WorkEstimate w = estimate_work(s);
  EXPECT_EQ(w.compute_ops, 392);
  EXPECT_EQ(w.transfers, 256 + 2 * 96);
  EXPECT_EQ(w.devices, s.cluster.num_devices());
  // The op CSV: 80 bytes a row, (392 + 448) rows; a warning only past 1 GiB.
  EXPECT_EQ(w.csv_bytes, 80.0 * (392 + 448));
  EXPECT_FALSE(csv_size_warning(w));
  WorkEstimate big = w;
  big.compute_ops = 2e7;
  big.transfers = 0;
  big.csv_bytes = 1.6e9;
  const auto warning = csv_size_warning(big);
  ASSERT_TRUE(warning);
  EXPECT_EQ(*warning,
            "--csv: the op CSV will be about 1.6 GB (2e+07 rows, one per op and collective step)");
}

// A chain of n GPUs (g0 - g1 - ... - g(n-1)), one data-parallel copy of two 1M-parameter
// layers on each, one micro-batch per copy, the gradients all-reduced by `allreduce`.
std::string chain_yaml(int n, const std::string& allreduce = "auto") {
  std::string y = "cluster:\n  devices:\n";
  for (int i = 0; i < n; ++i) y += fmt::format("    - {{name: g{}, gpu: a100-80gb}}\n", i);
  y += "  links:\n";
  for (int i = 0; i + 1 < n; ++i)
    y += fmt::format("    - {{between: [g{}, g{}], kind: nvlink, bandwidth: 100 GB/s}}\n", i,
                     i + 1);
  return y + fmt::format(R"(model:
  layers:
    - {{name: a, forward: 1 ms, backward: 2 ms, params: 1M}}
    - {{name: b, forward: 1 ms, backward: 2 ms, params: 1M}}
training: {{global_batch: {}, micro_batch: 1}}
strategy: {{schedule: dapple, pipeline: 1, data: {}, allreduce: {}}}
)",
                         n, n, allreduce);
}

TEST(WorkEstimate, LongRoutesCountTheFlowLinksTheirSharingMoves) {
  // A chain of 12 GPUs, one copy each: one bucket (8 MB of fp32 gradients) all-reduced
  // among 12. `auto` counts the larger of ring (2 x 11 x 12 = 264) and tree (2 x 2 x 8 x 11
  // = 352) transfers, and its flows as the ring's, each re-rating itself alone, over routes
  // of up to 11 links: 264 x 11 = 2,904 flow-links. The tree's flows cross one another's
  // links: each re-rates the 12 members' (352 x 12 x 11 = 46,464).
  const WorkEstimate w = estimate_work(load_scenario_text(chain_yaml(12), "chain.yaml"));
  EXPECT_EQ(w.transfers, 352);
  EXPECT_EQ(w.flow_pairs, 264);
  EXPECT_EQ(w.route_hops, 11);
  EXPECT_EQ(w.flow_hops(), 2904);
  EXPECT_EQ(estimate_work(load_scenario_text(chain_yaml(12, "tree"), "tree.yaml")).flow_hops(),
            46464);
  // Routing the graph: Dijkstra from each of the 12 GPUs over its 12 vertices and 11 links.
  EXPECT_EQ(w.route_search(), 12 * (12 + 11));
  WorkEstimate wide = w;  // 40,000 GPUs on one switch: 4e4 x 8e4 = 3.2e9, past 1e9
  wide.gpus_used = wide.devices = 40000;
  wide.graph_vertices = 40001;
  wide.graph_links = 40000;
  try {
    check_work(wide);
    ADD_FAILURE() << "not refused";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("finding this run's routes would search about 3.2e+09"),
              std::string::npos)
        << e.what();
    EXPECT_EQ(e.key(), "cluster");
  }
  // 3,000 GPUs under the tree: 32 x 2999 transfers x 3000 members x 2999 links = 8.63e11
  // flow-links, past the limit (the run would take minutes: a tree over 1,000 members of a
  // chain took 66 s); the same chain under `auto` (the ring) is 2 x 2999 x 3000 transfers
  // x 2999 links = 5.4e10 and runs in seconds.
  const Dir d("chain");
  const auto r = test::cli({"run", d.write("chain.yaml", chain_yaml(3000, "tree"))});
  expect_one_line_error(r,
                        "strategy: this run's collectives would move about 8.63e+11 flow-links");
  EXPECT_NE(r.err.find("routes of up to 2999 links"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("at most 4e+11"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("chain.yaml:"), std::string::npos) << r.err;
  const WorkEstimate ring = estimate_work(load_scenario_text(chain_yaml(3000), "ring.yaml"));
  EXPECT_NEAR(ring.flow_hops(), 2.0 * 2999 * 3000 * 2999, 1e4);
  EXPECT_NO_THROW(check_work(ring));
}

// The op limit counts one copy where the run folds its copies (a group of them built at a
// time, sim/copies.h), every copy where every copy is built (a trace, an op CSV,
// `--no-fold`, a backend): 6e7 ops over 16 copies are 3.75e6 a copy, within 5e7 folded
// and past it in full.
TEST(WorkEstimate, TheOpLimitCountsOneCopyWhereTheCopiesFold) {
  WorkEstimate w;
  w.compute_ops = 6e7;
  w.copies = 16;
  EXPECT_NO_THROW(check_work(w, Collectives::kCompact, Copies::kFolded));
  EXPECT_THROW(check_work(w, Collectives::kCompact, Copies::kEvery), InputError);
  w.compute_ops = 16 * 6e7;  // 6e7 a copy: past it either way, and the message says so
  try {
    check_work(w, Collectives::kCompact, Copies::kFolded);
    ADD_FAILURE() << "not refused";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("6e+07 for one of its 16 data-parallel copies"),
              std::string::npos)
        << e.what();
  }
}

// ---- overflow ----

TEST(Overflow, HugeModelsAndLatenciesAreBadInputNotUndefinedBehaviour) {
  // Before: signed overflow (the sanitizer build aborted) summing 4 x 9e18 parameters, and
  // adding up a 4,320,000 s latency in the routing weights.
  expect_one_line_error(
      test::cli({"run", std::string(PIPESIM_SOURCE_DIR) + "/scenarios/examples/toy-gpipe.yaml",
                 "--set", "model.layers.0.params=9000000000B"}),
      "is too large to simulate");
  expect_one_line_error(
      test::cli({"model", std::string(PIPESIM_SOURCE_DIR) + "/scenarios/examples/toy-gpipe.yaml",
                 "--set", "model.layers.0.forward=4000000 s"}),
      "is too large to simulate");
  for (const char* where : {"cluster.inter_node.latency", "cluster.intra_node.latency"}) {
    const auto r = test::cli({"run", "--set", std::string(where) + "=4320000 s"});
    EXPECT_TRUE(r.code == 0 || r.code == 2) << r.err;  // a result, or "too large" with a location
    if (r.code == 2) {
      EXPECT_TRUE(r.err.starts_with("pipesim: error: <default>")) << r.err;
    }
  }
  // A link too slow or too late for its transfers names the cluster (the model's totals
  // were bounded at load, so a transfer's time is what overflows).
  for (const char* set : {"cluster.inter_node.latency=3000000 s",
                          "cluster.inter_node.bandwidth=0.000001 B/s",
                          "cluster.intra_node.bandwidth=0.000001 B/s"}) {
    const auto r = test::cli({"run", "--set", set});
    expect_one_line_error(r, "is too large to simulate");
    EXPECT_TRUE(r.err.starts_with("pipesim: error: <default>: cluster: ")) << set << r.err;
  }
}

// A run past 106 days of simulated time: refused before anything is built when its compute
// alone is (2 layers of 900,000 s per micro-batch, 1000 micro-batches of 1 iteration:
// 9e8 s on each GPU, at the training key and line), else stopped by the engine with the
// key and file (10 micro-batches: 9e6 s of compute, past 106 days once the fill is added).
TEST(Inputs, SimulatedTimePast106DaysNamesTheKey) {
  const auto yaml = [](int batch) {
    return fmt::format(R"(cluster: {{gpu: a100-80gb, nodes: 1, gpus_per_node: 2}}
model:
  layers:
    - {{name: a, forward: 300000 s, backward: 600000 s}}
    - {{name: b, forward: 300000 s, backward: 600000 s}}
training: {{global_batch: {}, micro_batch: 1}}
strategy: {{schedule: gpipe, pipeline: 2}}
)",
                       batch);
  };
  const Dir d("days");
  const auto early = test::cli({"run", d.write("early.yaml", yaml(1000))});
  expect_one_line_error(early, "training: the run would simulate at least");
  EXPECT_NE(early.err.find("early.yaml:6:"), std::string::npos) << early.err;
  const auto late = test::cli({"run", d.write("late.yaml", yaml(10))});
  expect_one_line_error(late, "training: the simulated time is too large to simulate");
  EXPECT_NE(late.err.find("late.yaml"), std::string::npos) << late.err;
}

}  // namespace
}  // namespace pipesim
