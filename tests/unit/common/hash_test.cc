// Tests for common/util/hash: digests against published vectors, HashUnit and
// Seed64 against values computed with Python's hashlib.
#include "common/util/hash.h"

#include <catch2/catch.hpp>

namespace mesa_anyjev::util {
namespace {

TEST_CASE("Md5Hex matches the RFC 1321 test vectors", "[hash]") {
  CHECK(Md5Hex("") == "d41d8cd98f00b204e9800998ecf8427e");
  CHECK(Md5Hex("abc") == "900150983cd24fb0d6963f7d28e17f72");
  CHECK(Md5Hex("message digest") == "f96b697d7cb7938d525a2f31aaf161d0");
}

TEST_CASE("Sha256Hex matches the FIPS 180-2 test vectors", "[hash]") {
  CHECK(Sha256Hex("") ==
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(Sha256Hex("abc") ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST_CASE("Digests cover embedded NULs and non-ASCII bytes", "[hash]") {
  const std::string with_nul("a\0b", 3);
  CHECK(Md5Hex(with_nul) != Md5Hex("ab"));
  CHECK(Md5Hex(with_nul).size() == 32);
  CHECK(Sha256Hex("h\xc3\xa9llo").size() == 64);
}

// Expected values: (int(md5(t).hexdigest()[:8], 16) % 1000) / 1000 in Python.
TEST_CASE("HashUnit reproduces the reference hash_unit", "[hash]") {
  CHECK(HashUnit("") == 0.393);
  CHECK(HashUnit("abc") == 0.272);
  CHECK(HashUnit("hello|A") == 0.84);
  CHECK(HashUnit("The sky is blue today.|Yes") == 0.394);
  CHECK(HashUnit("h\xc3\xa9llo w\xc3\xb6rld|No") == 0.266);
}

// No "[0, 1)" in the name: an unbalanced [ makes catch_discover_tests
// (CMake list syntax) swallow every later test case into this one.
TEST_CASE("HashUnit stays in 0 <= u < 1 in steps of 0.001", "[hash]") {
  for (int i = 0; i < 200; ++i) {
    const double u = HashUnit(std::to_string(i));
    REQUIRE(u >= 0.0);
    REQUIRE(u < 1.0);
    const double thousandths = u * 1000.0;
    CHECK(thousandths ==
          Approx(static_cast<double>(static_cast<int>(thousandths + 0.5)))
              .margin(1e-9));
  }
}

// Expected: int.from_bytes(sha256(t).digest()[:8], "big") in Python.
TEST_CASE("Seed64 is the big-endian head of SHA-256", "[hash]") {
  CHECK(Seed64("") == 16406829232824261652ULL);
  CHECK(Seed64("abc") == 13436514500253700074ULL);
  CHECK(Seed64("hello|A") == 601537442509051622ULL);
  CHECK(Seed64("a") != Seed64("b"));
}

}  // namespace
}  // namespace mesa_anyjev::util
