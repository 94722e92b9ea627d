// dispatch/table/ops.md is generated from the op table and the backends: it must match
// what `tensorctl ops --markdown` prints now (per present backend).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "dispatch/dispatch.hpp"
#include "tools/ops_report.hpp"

namespace {

std::string read_file(const std::string& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The file without the sections ("## name" up to the next "## ") of backends
// absent on this machine; the names removed go to `skipped`.
std::string keep_present(const std::string& doc, const std::vector<std::string>& present, std::string& skipped) {
  std::string out;
  std::size_t pos = 0;
  while (pos < doc.size()) {
    const std::size_t next = doc.find("\n## ", pos + 1);
    const std::size_t end = next == std::string::npos ? doc.size() : next + 1;
    const std::string chunk = doc.substr(pos, end - pos);
    bool keep = true;
    if (chunk.rfind("## ", 0) == 0) {
      const std::string name = chunk.substr(3, chunk.find('\n') - 3);
      keep = std::find(present.begin(), present.end(), name) != present.end();
      if (!keep) skipped += name + " ";
    }
    if (keep) out += chunk;
    pos = end;
  }
  return out;
}

TEST(OpsDoc, MatchesTheGeneratedReport) {
  std::vector<tensor::DeviceId> devices;
  std::vector<std::string> names;
  for (tensor::DeviceId d : tensor::dispatch::available_devices())
    if (d.index_id == 0) {
      devices.push_back(d);
      names.push_back(tensor::dispatch::Registry::instance().get(d.type_id).short_name());
    }
  const std::string want = tensorctl::ops_markdown_document(devices);
  std::string skipped;
  const std::string have = keep_present(read_file(TENSOR_SOURCE_ROOT "/dispatch/table/ops.md"), names, skipped);
  if (!skipped.empty()) std::printf("sections not checked (no such device here): %s\n", skipped.c_str());
  EXPECT_EQ(have, want) << "dispatch/table/ops.md is stale: regenerate with `build/tools/tensorctl ops --markdown > dispatch/table/ops.md`";
  EXPECT_NE(have.find("## cpu"), std::string::npos);
}

}  // namespace
