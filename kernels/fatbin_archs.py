#!/usr/bin/env python3
"""Lists the SM architectures of the device code in an ELF file (a .so built by nvcc).

Prints one line per image: 'elf sm_90' or 'ptx sm_100'. Uses `cuobjdump --list-elf/--list-ptx`
when it is on PATH; otherwise reads the .nv_fatbin section itself (fatbin header magic 0xBA55ED50,
entries {u16 kind (1 PTX, 2 ELF), u16, u32 header size, u64 payload size, ..., u32 arch at +28}),
which is what this checkout's toolkit needs (nvcc 13 here ships no cuobjdump)."""
import re, shutil, struct, subprocess, sys, tempfile, os


def via_cuobjdump(path):
    out = []
    for flag, kind in (("--list-elf", "elf"), ("--list-ptx", "ptx")):
        r = subprocess.run(["cuobjdump", flag, path], capture_output=True, text=True)
        for m in re.finditer(r"sm_(\d+)", r.stdout):
            out.append(f"{kind} sm_{m.group(1)}")
    return out


def via_fatbin(path):
    with tempfile.TemporaryDirectory() as d:
        sec = os.path.join(d, "fatbin")
        subprocess.run(["objcopy", "-O", "binary", "--only-section=.nv_fatbin", path, sec], check=True)
        b = open(sec, "rb").read()
    out, off = [], 0
    while off + 16 <= len(b):
        magic, _ver, hs, fs = struct.unpack_from("<IHHQ", b, off)
        if magic != 0xBA55ED50:
            off += 8
            continue
        e, end = off + hs, off + hs + fs
        while e + 32 <= end:
            kind, _u, ehs, size = struct.unpack_from("<HHIQ", b, e)
            arch = struct.unpack_from("<I", b, e + 28)[0]
            name = {1: "ptx", 2: "elf"}.get(kind, "kind%d" % kind)
            out.append(f"{name} sm_{arch}")
            e += ehs + size
        off = end
    return out


def main():
    path = sys.argv[1]
    lines = via_cuobjdump(path) if shutil.which("cuobjdump") else via_fatbin(path)
    print("\n".join(lines))
    want = sys.argv[2].split(",") if len(sys.argv) > 2 else []
    missing = [a for a in want if f"elf sm_{a}" not in lines]
    if missing:
        print("missing SASS for: " + ",".join("sm_" + a for a in missing), file=sys.stderr)
        return 1
    return 0 if lines else 1


if __name__ == "__main__":
    sys.exit(main())
