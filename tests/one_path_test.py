#!/usr/bin/env python3
"""One invocation path (hooks see every op): forward<F> in dispatch/forward.hpp holds the only
invoke(...) call of dispatch's forwarding code, and the backend entry is looked up there
(EntryOf<F>); the family rules in dispatch/rules/ reach a backend only through the entry
forward hands their run(). dispatch.cpp calls device-level entries (get<DeviceOp::...>) only.
usage: one_path_test.py dispatch/forward.hpp dispatch/dispatch.cpp dispatch/rules/*.cpp"""
import re
import sys

fails = []
invokes = {}
for path in sys.argv[1:]:
    src = open(path, encoding="utf-8").read()
    code = re.sub(r"//[^\n]*", "", src)  # comments may name these calls
    invokes[path] = len(re.findall(r"\binvoke\(", code))
    if not path.endswith("forward.hpp"):
        for m in re.finditer(r"\bentry<|\.get<(?!DeviceOp::)|\bget<Family::", code):
            fails.append(f"{path}:{code.count(chr(10), 0, m.start()) + 1}: a backend entry called outside forward<F>")
        if invokes[path]:
            fails.append(f"{path}: {invokes[path]} invoke() calls; expected none outside forward.hpp")
forward = [p for p in invokes if p.endswith("forward.hpp")]
if len(forward) != 1 or invokes[forward[0]] != 1:
    fails.append(f"expected exactly one invoke() call, in dispatch/forward.hpp; got {invokes}")
rules = [p for p in invokes if "/rules/" in p]
if not rules:
    fails.append("no dispatch/rules/*.cpp given")
if fails:
    sys.exit("FAIL:\n" + "\n".join(fails))
print(f"ok: one invoke() call (dispatch/forward.hpp); {len(rules)} rules files reach backends only through it")
