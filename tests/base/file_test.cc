#include "base/file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace tessera {
namespace {

std::filesystem::path TempDir() {
  const std::filesystem::path d = std::filesystem::temp_directory_path() /
                                  ("tessera_file_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::create_directories(d);
  return d;
}

TEST(ReadFile, ReturnsTheBytesAsTheyAre) {
  const std::filesystem::path p = TempDir() / "bytes.bin";
  std::string content = "line 1\r\nline 2\n";
  content.push_back('\0');
  content += std::string(200000, 'x');  // longer than one read buffer
  {
    std::ofstream out(p, std::ios::binary);
    out << content;
  }
  Result<std::string> r = ReadFile(p.string());
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(*r, content);
}

TEST(ReadFile, EmptyFileIsEmptyText) {
  const std::filesystem::path p = TempDir() / "empty.txt";
  { std::ofstream out(p); }
  Result<std::string> r = ReadFile(p.string());
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ(*r, "");
}

TEST(ReadFile, MissingFileNamesThePathAndTheReason) {
  const std::string p = (TempDir() / "no-such-file.yaml").string();
  Result<std::string> r = ReadFile(p);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find(p), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("No such file or directory"), std::string::npos) << r.error();
}

TEST(ReadFile, DirectoryIsAnError) {
  const std::filesystem::path d = TempDir();
  Result<std::string> r = ReadFile(d.string());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().find(d.string()), std::string::npos) << r.error();
  EXPECT_NE(r.error().find("Is a directory"), std::string::npos) << r.error();
}

// Every line in order with its number, '\r' stripped once, empty lines kept, the last line without '\n'
// counted, and nothing after the final '\n'.
TEST(LineReader, YieldsEachLineWithItsNumber) {
  LineReader r("a,b\r\n\nc\r\r\nlast");
  std::vector<std::pair<int, std::string>> got;
  std::string_view line;
  while (r.Next(&line)) got.emplace_back(r.line_no(), std::string(line));
  const std::vector<std::pair<int, std::string>> want = {{1, "a,b"}, {2, ""}, {3, "c\r"}, {4, "last"}};
  EXPECT_EQ(got, want);
  EXPECT_FALSE(r.Next(&line));
}

TEST(LineReader, EmptyTextAndTrailingNewline) {
  std::string_view line;
  LineReader empty("");
  EXPECT_FALSE(empty.Next(&line));
  LineReader one("x\n");
  ASSERT_TRUE(one.Next(&line));
  EXPECT_EQ(line, "x");
  EXPECT_FALSE(one.Next(&line));
  EXPECT_EQ(one.line_no(), 1);
}

}  // namespace
}  // namespace tessera
