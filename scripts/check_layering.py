#!/usr/bin/env python3
"""Fails when a source file includes a header of a layer above its own, or an
installed header (include/sluice/) one that is not installed.

sluice's layers (shared/DESIGN.md, src/sluice/CMakeLists.txt), each allowed
to include only itself and the layers listed for it:

    core  <- io <- datagen
          <- io <- kernels <- ops <- graph <- exec <- service, profile <- placement <- api <- cli, python

The build enforces most of this by linking (a layer's library links only
lower ones), but a header-only use of an upper layer links fine: this check
reads every #include. Run from anywhere: `scripts/check_layering.py [ROOT]`.
"""

import pathlib
import re
import sys

# What each layer may include, itself included.
ALLOWED = {
    "core": {"core"},
    "io": {"core", "io"},
    "datagen": {"core", "io", "datagen", "proto"},
    "kernels": {"core", "io", "kernels"},
    "ops": {"core", "io", "kernels", "ops", "proto"},
    "graph": {"core", "io", "kernels", "ops", "graph", "proto"},
    "exec": {"core", "io", "kernels", "ops", "graph", "exec", "proto"},
    "service": {"core", "io", "kernels", "ops", "graph", "exec", "service", "proto", "service_proto"},
    "profile": {"core", "io", "kernels", "ops", "graph", "exec", "profile", "proto"},
    "placement": {"core", "io", "kernels", "ops", "graph", "exec", "service", "profile", "placement", "proto",
                  "service_proto"},
    "api": {"core", "io", "kernels", "ops", "graph", "exec", "service", "profile", "placement", "api", "proto",
            "service_proto"},
    "cli": {"core", "io", "datagen", "kernels", "ops", "graph", "exec", "service", "profile", "placement", "api", "cli",
            "proto", "service_proto"},
    "python": {"core", "io", "kernels", "ops", "graph", "exec", "service", "profile", "placement", "api", "python",
               "proto", "service_proto"},
}

# Headers outside src/sluice/<layer>/: the public ones in include/sluice/,
# the generated ones, and the layer each belongs to.
SPECIAL = {
    "sluice/version.h": "core",
    "sluice/pipeline_builder.h": "graph",
    "sluice/pipeline.h": "api",
    "sluice/sluice.h": "api",
    "example.pb.h": "proto",
    "pipeline.pb.h": "proto",
    "service.pb.h": "service_proto",
    "service.grpc.pb.h": "service_proto",
}

# Headers the build generates into the installed include/sluice/.
GENERATED = {"sluice/version.h"}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of_header(path):
    """The layer an included path belongs to, or None for third-party headers."""
    if path in SPECIAL:
        return SPECIAL[path]
    m = re.match(r"sluice/([a-z_]+)/", path)
    return m.group(1) if m else None


def layer_of_file(root, file):
    rel = file.relative_to(root).as_posix()
    m = re.match(r"src/sluice/([a-z_]+)/", rel)
    if m:
        return m.group(1)
    if rel.startswith("python/src/"):
        return "python"
    if rel.startswith("include/sluice/"):
        return layer_of_header(rel[len("include/"):])
    return None


def public_violations(root, file, lines):
    """An installed header (include/sluice/) that includes one that is not installed."""
    found = []
    for number, line in enumerate(lines, 1):
        m = INCLUDE.match(line)
        if m and m.group(1).startswith("sluice/") and m.group(1) not in GENERATED:
            if not (root / "include" / m.group(1)).exists():
                found.append(f"{file.relative_to(root)}:{number}: the public header includes \"{m.group(1)}\", "
                             "which is not installed (not under include/)")
    return found


def violations(root):
    root = pathlib.Path(root)
    found = []
    files = [f for d in ("src/sluice", "include/sluice", "python/src") for f in sorted((root / d).rglob("*"))
             if f.suffix in (".h", ".cc", ".cu")]
    for file in files:
        layer = layer_of_file(root, file)
        if layer is None:
            continue
        if layer not in ALLOWED:
            found.append(f"{file.relative_to(root)}: the folder is no known layer (add it to {__file__})")
            continue
        lines = file.read_text().splitlines()
        if file.relative_to(root).as_posix().startswith("include/"):
            found += public_violations(root, file, lines)
        for number, line in enumerate(lines, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = layer_of_header(m.group(1))
            if target is not None and target not in ALLOWED[layer]:
                found.append(f"{file.relative_to(root)}:{number}: layer '{layer}' includes \"{m.group(1)}\" "
                             f"of layer '{target}', which is above it")
    return found


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent
    found = violations(root)
    for v in found:
        print(v)
    print(f"check_layering: {len(found)} upward include(s)" if found else "check_layering: no upward include")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
