#!/usr/bin/env python3
"""Every backend entry that dispatch.cpp calls sits inside an invoke(...) call (issue 11:
one invocation path; hooks see every op). Only the device-level entries (get<DeviceOp::...>)
may bypass it. usage: one_path_test.py dispatch/dispatch.cpp"""
import re
import sys

src = open(sys.argv[1], encoding="utf-8").read()
spans = []
for m in re.finditer(r"\binvoke\(", src):
    i, depth = m.end(), 1
    while depth:
        depth += {"(": 1, ")": -1}.get(src[i], 0)
        i += 1
    spans.append((m.start(), i))
entries = [m.start() for m in re.finditer(r"entry<Family::", src)]
outside = [src.count("\n", 0, e) + 1 for e in entries if not any(a <= e < b for a, b in spans)]
if not entries or not spans:
    sys.exit(f"FAIL: found {len(entries)} backend entry calls and {len(spans)} invoke calls; expected both")
if outside:
    sys.exit(f"FAIL: backend entries called outside invoke() at dispatch.cpp lines {outside}")
print(f"ok: {len(entries)} backend entry calls, all inside {len(spans)} invoke() calls")
