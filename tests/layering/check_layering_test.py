#!/usr/bin/env python3
"""The layering check (scripts/check_layering.py) passes on the tree and
fails on a copy with an upward include planted in it."""

import pathlib
import shutil
import sys
import tempfile
import unittest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import check_layering  # noqa: E402


class CheckLayeringTest(unittest.TestCase):
    def setUp(self):
        self.tmp = pathlib.Path(tempfile.mkdtemp())
        for d in ("src", "include", "python/src"):
            shutil.copytree(ROOT / d, self.tmp / d)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def plant(self, rel, include):
        path = self.tmp / rel
        path.write_text(f'#include "{include}"\n' + path.read_text())

    def test_the_tree_as_it_is_passes(self):
        self.assertEqual(check_layering.violations(self.tmp), [])

    def test_core_including_the_executor_fails_naming_file_line_and_layers(self):
        self.plant("src/sluice/core/tensor.cc", "sluice/exec/pipeline.h")
        found = check_layering.violations(self.tmp)
        self.assertEqual(len(found), 1)
        self.assertIn("src/sluice/core/tensor.cc:1: layer 'core' includes \"sluice/exec/pipeline.h\" of layer 'exec'",
                      found[0])

    def test_ops_including_the_service_proto_or_the_public_pipeline_fails(self):
        self.plant("src/sluice/ops/framework/kernel.cc", "service.pb.h")
        self.plant("src/sluice/graph/fusion.h", "sluice/pipeline.h")
        found = check_layering.violations(self.tmp)
        self.assertEqual(len(found), 2, found)

    def test_a_kernel_including_the_op_framework_fails(self):
        self.plant("src/sluice/kernels/warp.cc", "sluice/ops/field.h")
        found = check_layering.violations(self.tmp)
        self.assertEqual(len(found), 1, found)
        self.assertIn("layer 'kernels' includes \"sluice/ops/field.h\" of layer 'ops'", found[0])

    def test_a_public_header_including_an_internal_one_fails(self):
        self.plant("include/sluice/ops/kernel.h", "sluice/ops/builtin_ops.h")
        found = check_layering.violations(self.tmp)
        self.assertEqual(len(found), 1, found)
        self.assertIn("include/sluice/ops/kernel.h:1: the public header includes \"sluice/ops/builtin_ops.h\", "
                      "which is not installed", found[0])

    def test_the_command_line_exits_non_zero(self):
        self.plant("src/sluice/io/crc32c.cc", "sluice/ops/kernel.h")
        sys.argv = ["check_layering.py", str(self.tmp)]
        self.assertEqual(check_layering.main(), 1)


if __name__ == "__main__":
    unittest.main()
