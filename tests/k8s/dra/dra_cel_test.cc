// The CEL subset against the expressions DRA selectors for GPUs use (the NVIDIA DeviceClasses, profile
// and quantity selectors), CEL's error absorption, runtime errors and unsupported expressions.
#include "k8s/dra/dra_cel.h"

#include <gtest/gtest.h>

namespace tessera {
namespace {

DraDevice MigDevice() {
  DraDevice d;
  d.name = "gpu-0-mig-1g10gb-19-0";
  d.attributes["type"] = std::string("mig");
  d.attributes["profile"] = std::string("1g.10gb");
  d.attributes["cudaComputeCapability"] = DraVersion{8, 0, 0, ""};
  d.attributes["resource.kubernetes.io/pciBusID"] = std::string("0000:07:00.0");
  d.attributes["index"] = int64_t{3};
  d.attributes["healthy"] = true;
  d.capacity_milli["memory"] = int64_t{9728} * 1048576 * 1000;
  return d;
}

CelVerdict Verdict(const std::string& e, const DraDevice& d = MigDevice()) {
  return CelSelector::Compile(e).Evaluate(d, "gpu.nvidia.com").verdict;
}

TEST(DraCel, NvidiaDeviceClassesAndProfiles) {
  EXPECT_EQ(Verdict("device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'"),
            CelVerdict::kMatch);
  EXPECT_EQ(Verdict("device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"),
            CelVerdict::kNoMatch);
  EXPECT_EQ(Verdict("device.attributes[\"gpu.nvidia.com\"].profile == \"1g.10gb\""), CelVerdict::kMatch);
  EXPECT_EQ(Verdict("device.attributes[\"gpu.nvidia.com\"].profile != \"1g.10gb\""), CelVerdict::kNoMatch);
  EXPECT_EQ(Verdict("device.attributes['resource.kubernetes.io'].pciBusID == '0000:07:00.0'"),
            CelVerdict::kMatch);
  EXPECT_EQ(Verdict("device.attributes['gpu.nvidia.com'].profile in ['1g.10gb', '2g.20gb']"),
            CelVerdict::kMatch);
  EXPECT_EQ(Verdict("device.attributes['gpu.nvidia.com'].profile in ['3g.40gb']"), CelVerdict::kNoMatch);
  EXPECT_EQ(Verdict("'profile' in device.attributes['gpu.nvidia.com']"), CelVerdict::kMatch);
}

TEST(DraCel, QuantitiesVersionsAndIntegers) {
  EXPECT_EQ(Verdict("device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"40Gi\")) >= 0"),
            CelVerdict::kNoMatch);
  EXPECT_EQ(Verdict("device.capacity[\"gpu.nvidia.com\"].memory.compareTo(quantity(\"9Gi\")) >= 0"),
            CelVerdict::kMatch);
  EXPECT_EQ(Verdict("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('9728Mi')) == 0"),
            CelVerdict::kMatch);
  EXPECT_EQ(Verdict("device.capacity['gpu.nvidia.com'].memory.isLessThan(quantity('10Gi'))"),
            CelVerdict::kMatch);
  EXPECT_EQ(
      Verdict("device.attributes['gpu.nvidia.com'].cudaComputeCapability.isGreaterThan(semver('7.5.0'))"),
      CelVerdict::kMatch);
  EXPECT_EQ(
      Verdict("device.attributes['gpu.nvidia.com'].cudaComputeCapability.compareTo(semver('9.0.0')) < 0"),
      CelVerdict::kMatch);
  EXPECT_EQ(
      Verdict(
          "device.attributes['gpu.nvidia.com'].index >= 2 && device.attributes['gpu.nvidia.com'].index < 4"),
      CelVerdict::kMatch);
  EXPECT_EQ(Verdict("device.attributes['gpu.nvidia.com'].index > -1"), CelVerdict::kMatch);
  EXPECT_EQ(Verdict("!(device.attributes['gpu.nvidia.com'].healthy) || false"), CelVerdict::kNoMatch);
  EXPECT_EQ(Verdict("device.attributes['gpu.nvidia.com'].profile.startsWith('1g.')"), CelVerdict::kMatch);
  EXPECT_EQ(Verdict("has(device.attributes['gpu.nvidia.com'].uuid)"), CelVerdict::kNoMatch);
}

TEST(DraCel, MissingAttributeIsARuntimeErrorUnlessAbsorbed) {
  // The full GPU has no `profile`: evaluating it is an error, which fails the device for the claim.
  const CelOutcome o = CelSelector::Compile("device.attributes['gpu.nvidia.com'].nope == 'x'")
                           .Evaluate(MigDevice(), "gpu.nvidia.com");
  EXPECT_EQ(o.verdict, CelVerdict::kError);
  EXPECT_NE(o.message.find("nope"), std::string::npos) << o.message;
  // false && error is false; true || error is true (either side).
  EXPECT_EQ(Verdict("device.driver == 'x' && device.attributes['gpu.nvidia.com'].nope == 1"),
            CelVerdict::kNoMatch);
  EXPECT_EQ(Verdict("device.attributes['gpu.nvidia.com'].nope == 1 && device.driver == 'x'"),
            CelVerdict::kNoMatch);
  EXPECT_EQ(Verdict("device.attributes['gpu.nvidia.com'].nope == 1 || device.driver == 'gpu.nvidia.com'"),
            CelVerdict::kMatch);
  EXPECT_EQ(Verdict("device.attributes['gpu.nvidia.com'].nope == 1 || device.driver == 'x'"),
            CelVerdict::kError);
  // Mixed types and ordering on quantities are errors, as in CEL.
  EXPECT_EQ(Verdict("device.attributes['gpu.nvidia.com'].index == '3'"), CelVerdict::kError);
  EXPECT_EQ(Verdict("device.capacity['gpu.nvidia.com'].memory > quantity('1Gi')"), CelVerdict::kError);
  EXPECT_EQ(Verdict("device.attributes['gpu.nvidia.com'].type"), CelVerdict::kError);  // not a bool
  EXPECT_EQ(Verdict("quantity('forty') == quantity('40Gi')"), CelVerdict::kError);
}

TEST(DraCel, OutsideTheSubsetIsUnsupportedNamingTheExpression) {
  for (const std::string e :
       {"device.attributes['gpu.nvidia.com'].profile.matches('^1g')", "size(device.attributes) > 2",
        "device.attributes['gpu.nvidia.com'].index + 1 == 4", "device.driver == 'a' ? true : false",
        "1.5 < 2", "request.count == 1", "device.capacity['gpu.nvidia.com'].memory.asInteger() > 0",
        "device.attributes['gpu.nvidia.com'].?profile == 'x'", "device.driver ==", "(device.driver == 'a'",
        "{'a': 1}['a'] == 1", "device.attributes['gpu.nvidia.com'].index.startsWith('1')"}) {
    const CelOutcome o = CelSelector::Compile(e).Evaluate(MigDevice(), "gpu.nvidia.com");
    EXPECT_EQ(o.verdict, CelVerdict::kUnsupported) << e;
    EXPECT_NE(o.message.find(e), std::string::npos) << o.message;
  }
  EXPECT_FALSE(CelSelector::Compile("device.driver == 'a' ? true : false").supported());
  EXPECT_TRUE(CelSelector::Compile("device.driver == 'a'").supported());
}

TEST(DraCel, UnsupportedWinsOverAbsorption) {
  // Never a silent match: an unsupported part makes the whole expression unsupported.
  EXPECT_EQ(
      Verdict(
          "device.driver == 'gpu.nvidia.com' || device.attributes['gpu.nvidia.com'].index.startsWith('1')"),
      CelVerdict::kUnsupported);
}

}  // namespace
}  // namespace tessera
