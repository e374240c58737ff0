#include "test_util.hpp"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>

#include <spdlog/sinks/ostream_sink.h>

#include <algorithm>
#include <sstream>

#include "base/log.hpp"
#include "runtime/embedded_sources.hpp"

namespace fa4::test {

using detail::driver;

const std::vector<detail::EmbeddedSource>& test_kernel_sources();  // generated from tests/kernels/

std::string_view test_source(std::string_view path) {
  for (const detail::EmbeddedSource& s : test_kernel_sources())
    if (s.path == path) return s.text;
  return verify_source(path);
}

void expect_case_passes(Attention& attention, Backend expected, const Case& c, const char* tag) {
  uint64_t seed = std::hash<std::string>{}(c.name);
  for (const Shape& shape : c.shapes) {
    const CheckResult r = check_attention(attention, expected, c, shape, ++seed);
    EXPECT_TRUE(r.passed) << r.summary << r.failures;
    std::cout << "[" << tag << "] " << r.summary << (r.passed ? "" : "  FAILED") << "\n";
  }
}

struct CapturedLog::Sink {
  std::ostringstream text;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(text);
};

CapturedLog::CapturedLog() : sink_(std::make_shared<Sink>()) { detail::log().sinks().push_back(sink_->sink); }

CapturedLog::~CapturedLog() {
  auto& sinks = detail::log().sinks();
  sinks.erase(std::remove(sinks.begin(), sinks.end(), sink_->sink), sinks.end());
}

std::string CapturedLog::text() const { return sink_->text.str(); }

TempDir::TempDir() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "fa4rt-test-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::permissions(path_, std::filesystem::perms::owner_all, ec);
  std::filesystem::remove_all(path_, ec);
}

Streams::Streams(int n) : s(n) {
  for (CUstream& x : s) FA4_CU(cuStreamCreate(&x, CU_STREAM_NON_BLOCKING));
}
Streams::~Streams() {
  for (CUstream x : s)
    if (x) detail::driver().cuStreamDestroy(x);
}

Graph::~Graph() {
  if (exec) detail::driver().cuGraphExecDestroy(exec);
  if (graph) detail::driver().cuGraphDestroy(graph);
}

void capture_run(Attention& attention, const AttentionParams& p, CUstream stream, CUstreamCaptureMode mode, Graph& g) {
  FA4_CU(cuStreamBeginCapture(stream, mode));
  try {
    attention.run(p, stream);
  } catch (...) {
    CUgraph partial = nullptr;
    detail::driver().cuStreamEndCapture(stream, &partial);
    if (partial) detail::driver().cuGraphDestroy(partial);
    throw;
  }
  FA4_CU(cuStreamEndCapture(stream, &g.graph));
  FA4_CU(cuGraphInstantiate(&g.exec, g.graph, 0));
}

}  // namespace fa4::test
