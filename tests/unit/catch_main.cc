// Catch2 v2's main, alone in its file so it compiles once (~25 s) and never
// again.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
