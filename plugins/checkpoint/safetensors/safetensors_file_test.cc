#include "plugins/checkpoint/safetensors/safetensors_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace titan::safetensors {
namespace {

using ::testing::HasSubstr;

// The 8-byte little-endian size, then the JSON, then `data`.
std::string File(const std::string& json, const std::string& data = "") {
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
  return file + json + data;
}

std::string ErrorOf(const std::string& file) {
  absl::StatusOr<FileHeader> header = ParseHeader(file, "/x/model.safetensors");
  EXPECT_FALSE(header.ok());
  return std::string(header.status().message());
}

TEST(SafetensorsHeader, EncodesSortedAlignedJsonAndParsesBack) {
  std::vector<TensorEntry> tensors = {{"b", DType::kBF16, {3}, 0, 0},
                                      {"a", DType::kF32, {2, 2}, 0, 0}};
  const std::string header = EncodeHeader(tensors, {{"format", "pt"}});
  uint64_t size = 0;
  std::memcpy(&size, header.data(), 8);  // little-endian on every machine titan runs on
  EXPECT_EQ(size + 8, header.size());
  EXPECT_EQ(header.size() % 8, 0u) << "the data section must start 8-byte aligned";
  const std::string json =
      "{\"__metadata__\":{\"format\":\"pt\"},"
      "\"a\":{\"data_offsets\":[0,16],\"dtype\":\"F32\",\"shape\":[2,2]},"
      "\"b\":{\"data_offsets\":[16,22],\"dtype\":\"BF16\",\"shape\":[3]}}";
  ASSERT_GE(header.size(), 8 + json.size());
  EXPECT_EQ(header.substr(8), json + std::string(header.size() - 8 - json.size(), ' '))
      << "padded with spaces, as the format says";
  ASSERT_EQ(tensors[0].name, "a");
  EXPECT_EQ(tensors[1].begin, 16u);
  EXPECT_EQ(tensors[1].end, 22u);

  absl::StatusOr<FileHeader> parsed = ParseHeader(header + std::string(22, '\0'), "f");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->data_start, header.size());
  EXPECT_EQ(parsed->metadata.at("format"), "pt");
  ASSERT_EQ(parsed->tensors.size(), 2u);
  EXPECT_EQ(parsed->tensors[1].name, "b");
  EXPECT_EQ(parsed->tensors[1].dtype, DType::kBF16);
  EXPECT_EQ(parsed->tensors[1].shape, std::vector<int64_t>{3});
}

TEST(SafetensorsHeader, ReadsEveryTitanDTypeAndRefusesOthers) {
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3, DType::kF8E5M2,
                      DType::kI32, DType::kI64}) {
    EXPECT_EQ(*DTypeFromSafetensors(SafetensorsDTypeName(dtype)), dtype);
  }
  EXPECT_THAT(std::string(DTypeFromSafetensors("F64").status().message()),
              HasSubstr("dtype 'F64' is not one titan reads (F32, BF16"));
}

TEST(SafetensorsHeader, AcceptsUnsortedEntriesAndZeroSizedTensors) {
  const std::string json = R"({"z":{"dtype":"F16","shape":[1],"data_offsets":[0,2]},)"
                           R"("e":{"dtype":"F32","shape":[0,5],"data_offsets":[2,2]},)"
                           R"("a":{"dtype":"F16","shape":[],"data_offsets":[2,4]}})";
  absl::StatusOr<FileHeader> parsed = ParseHeader(File(json, "abcd"), "f");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->tensors.size(), 3u);
  EXPECT_EQ(parsed->tensors[0].name, "z");  // in data order
  EXPECT_EQ(parsed->data_start, 8 + json.size());
}

TEST(SafetensorsHeader, RefusesCorruptHeadersNamingFileAndFault) {
  const std::string ok_entry = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  EXPECT_THAT(ErrorOf("abc"), HasSubstr("/x/model.safetensors: the file is 3 bytes long; "
                                        "expected at least the 8-byte header size"));
  EXPECT_THAT(ErrorOf(std::string("\xff\x00\x00\x00\x00\x00\x00\x00{}", 10)),
              HasSubstr("header size 255 runs past the end of the file (10 bytes)"));
  EXPECT_THAT(ErrorOf(std::string("\x00\x00\x00\x00\x01\x00\x00\x00", 8)),
              HasSubstr("header size 4294967296 exceeds the format's limit of 100000000 bytes"));
  EXPECT_THAT(ErrorOf(File("[1]")), HasSubstr("expected the JSON header to start with '{'"));
  EXPECT_THAT(ErrorOf(File("{\"a\":")), HasSubstr("the JSON header does not parse"));
  EXPECT_THAT(ErrorOf(File(R"({"a":{"dtype":"Q8","shape":[2],"data_offsets":[0,8]}})", "12345678")),
              HasSubstr("tensor 'a': dtype 'Q8' is not one titan reads"));
  EXPECT_THAT(ErrorOf(File(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", "12345678")),
              HasSubstr("tensor 'a': expected a string \"dtype\""));
  EXPECT_THAT(ErrorOf(File(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})")),
              HasSubstr("expected a shape of non-negative integers, found [-2]"));
  EXPECT_THAT(ErrorOf(File(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})")),
              HasSubstr("expected \"data_offsets\": [begin, end]"));
  EXPECT_THAT(ErrorOf(File("{" + ok_entry + "}", "1234")),
              HasSubstr("tensor 'a': data_offsets [0, 8) lie outside the 4 bytes of data"));
  EXPECT_THAT(
      ErrorOf(File(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", "12345678")),
      HasSubstr("shape [3] of F32 needs 12 bytes, data_offsets [0, 8) hold 8"));
  EXPECT_THAT(
      ErrorOf(File(R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,8]}})",
                   "12345678")),
      HasSubstr("its size overflows 64 bits"));
  EXPECT_THAT(
      ErrorOf(File("{" + ok_entry + R"(,"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                   "123456789012")),
      HasSubstr("tensors 'a' [0, 8) and 'b' [4, 12) overlap"));
  EXPECT_THAT(
      ErrorOf(File("{" + ok_entry + R"(,"b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})",
                   "1234567890123456")),
      HasSubstr("data bytes [8, 12) belong to no tensor"));
  EXPECT_THAT(ErrorOf(File("{" + ok_entry + "}", "1234567890")),
              HasSubstr("data bytes [8, 10) belong to no tensor"));
  EXPECT_THAT(ErrorOf(File(R"({"__metadata__":{"step":3}})")),
              HasSubstr("__metadata__ key 'step': expected a string, found 3"));
}

TEST(SafetensorsFile, WriterAndMappingRoundTrip) {
  const std::string path = absl::StrCat(testing::TempDir(), "/titan_st_file_", getpid());
  std::vector<TensorEntry> tensors = {{"w", DType::kF32, {2}, 0, 0}, {"v", DType::kI32, {1}, 0, 0}};
  auto writer = FileWriter::Create(path, tensors, {{"k", "v"}});
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_EQ((*writer)->tensors()[0].name, "v");
  const int32_t v = 7;
  const float w[2] = {1.5f, -2.0f};
  EXPECT_THAT(std::string((*writer)->Close().message()), HasSubstr("closed after 0 of 12 bytes"));
  writer = FileWriter::Create(path, tensors, {{"k", "v"}});
  ASSERT_TRUE((*writer)->Append(&v, 4).ok());
  ASSERT_TRUE((*writer)->Append(w, 8).ok());
  EXPECT_THAT(std::string((*writer)->Append(w, 1).message()), HasSubstr("13 bytes of data"));
  ASSERT_TRUE((*writer)->Close().ok());

  auto mapped = MappedFile::Open(path);
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  absl::StatusOr<FileHeader> header = ParseHeader((*mapped)->bytes(), path);
  ASSERT_TRUE(header.ok()) << header.status();
  float read[2];
  std::memcpy(read, (*mapped)->bytes().data() + header->data_start + header->tensors[1].begin, 8);
  EXPECT_EQ(read[0], 1.5f);
  EXPECT_EQ(read[1], -2.0f);
  std::filesystem::remove(path);
  EXPECT_THAT(std::string(MappedFile::Open(path).status().message()),
              HasSubstr(path + ": cannot open: No such file"));
  // A folder in a safetensors file's place is named as one (issue #39), not "cannot map: No
  // such device".
  std::filesystem::create_directories(path);
  EXPECT_EQ(MappedFile::Open(path).status().message(),
            path + ": not a file (a folder): expected a safetensors file");
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace titan::safetensors
