// C++ that gcc 12 accepts and clang 14 refuses (a lambda's capture of a
// structured binding; clang accepts it from 16), on purpose:
// tests/e2e/test_build_routes.py gives it to scripts/check_clang.py and
// requires the check to fail naming it.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

int CountKeysNamedIn(const std::map<std::string, int>& table,
                     const std::vector<std::string>& names) {
  int found = 0;
  for (const auto& [key, value] : table) {
    found += static_cast<int>(std::count_if(
        names.begin(), names.end(),
        [&](const std::string& name) { return name == key && value > 0; }));
  }
  return found;
}
