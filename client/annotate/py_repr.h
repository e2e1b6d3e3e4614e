// Python's repr() of the two values annotate prints: a str (the AVU value on
// each proposal line) and a dict of str -> int (the outcome counts on the
// summary line), so the CLI's lines read as the reference's do.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace mesa_anyjev::annotate {

// repr(str) as CPython 3 writes it: single quotes unless the text holds a
// ' and no "; \\, the quote, \t, \n and \r escaped; other characters that
// str.isprintable() rejects (categories Cc, Cf, Cs, Co, Cn, Zl, Zp, and Zs
// other than the space) as \xhh, \uhhhh or \Uhhhhhhhh. Invalid UTF-8 bytes
// are written as \xhh (Python would never hold them in a str).
std::string PyStrRepr(std::string_view utf8);

// repr(dict) of str -> int in the map's (sorted) key order:
// {'abstain': 3, 'proposed': 5}; {} when empty.
std::string PyCountsRepr(const std::map<std::string, int>& counts);

// repr(list) of str: ['envo', 'uo']; [] when empty.
std::string PyStrListRepr(const std::vector<std::string>& items);

}  // namespace mesa_anyjev::annotate
