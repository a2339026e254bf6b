// What a node is: Yama's ptrace scope from its file, and nvidia-smi's GPU
// inventory from its CSV answer (the prolog pins it, pilot doctor checks it).
#include "job/node_facts.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace pilot::job {
namespace {

TEST(NodeFacts, PtraceScopeFromItsFile) {
  char tmpl[] = "/tmp/pilot-yama-XXXXXX";
  const int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  close(fd);
  const std::string path = tmpl;
  for (const auto& [text, want] : std::vector<std::pair<std::string, int>>{
           {"1\n", 1}, {"0\n", 0}, {"3", 3}, {"4\n", -1}, {"", -1}, {"12\n", -1}, {"x\n", -1}}) {
    std::ofstream(path, std::ios::trunc) << text;
    EXPECT_EQ(PtraceScope(path), want) << "'" << text << "'";
  }
  unlink(path.c_str());
  EXPECT_EQ(PtraceScope(path), -1);  // no Yama
}

TEST(NodeFacts, GpuInventoryFromCsv) {
  GpuInventory inv = ParseGpuInventory(
      "0, NVIDIA H100 80GB HBM3, GPU-aaaa, 81559, 580.95.05\n"
      "1, NVIDIA H100 80GB HBM3, GPU-bbbb, 81559, 580.95.05\n"
      "garbage line\n");
  ASSERT_EQ(inv.gpus.size(), 2u);
  EXPECT_EQ(inv.gpus[1].index, 1);
  EXPECT_EQ(inv.gpus[0].name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(inv.gpus[0].uuid, "GPU-aaaa");
  EXPECT_EQ(inv.gpus[0].memory_bytes, int64_t{81559} << 20);
  EXPECT_EQ(inv.driver_version, "580.95.05");
  EXPECT_TRUE(ParseGpuInventory("").gpus.empty());
  EXPECT_EQ(GpuInventoryArgv().front(), "--query-gpu=index,name,uuid,memory.total,driver_version");
}

}  // namespace
}  // namespace pilot::job
