#!/usr/bin/env python3
"""The style check (scripts/check_style.py) passes on the tree and fails on
a copy with a badly formatted line or an overlong function planted in it."""

import pathlib
import shutil
import sys
import tempfile
import unittest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import check_style  # noqa: E402

GOOD = "int Add(int a, int b) { return a + b; }\n"


class CheckStyleTest(unittest.TestCase):
    def setUp(self):
        self.tmp = pathlib.Path(tempfile.mkdtemp())
        shutil.copy(ROOT / ".clang-format", self.tmp / ".clang-format")
        (self.tmp / "src").mkdir()
        (self.tmp / "src" / "good.cc").write_text(GOOD)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_the_tree_as_it_is_passes(self):
        self.assertEqual(check_style.violations(ROOT), [])

    def test_a_small_formatted_file_passes(self):
        self.assertEqual(check_style.violations(self.tmp), [])

    def test_a_badly_formatted_file_fails_naming_it(self):
        (self.tmp / "src" / "bad.cc").write_text("int  Sub(int a,int b){return a-b;}\n")
        found = check_style.violations(self.tmp)
        self.assertEqual(found, ["src/bad.cc: not formatted (clang-format -i src/bad.cc)"])

    def test_a_function_over_the_limit_fails_naming_it_and_its_length(self):
        body = "".join(f"  int v{i} = {i};\n" for i in range(check_style.MAX_LINES))
        (self.tmp / "src" / "long.cc").write_text(f"int Long() {{\n{body}  return 0;\n}}\n")
        found = check_style.violations(self.tmp)
        self.assertEqual(len(found), 1, found)
        self.assertIn("src/long.cc:1: Long is 83 lines (at most 80", found[0])

    def test_the_command_line_exits_non_zero(self):
        (self.tmp / "src" / "bad.cc").write_text("int  Sub(int a,int b){return a-b;}\n")
        sys.argv = ["check_style.py", str(self.tmp)]
        self.assertEqual(check_style.main(), 1)


if __name__ == "__main__":
    unittest.main()
