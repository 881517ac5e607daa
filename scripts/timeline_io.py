"""Reader of the timeline file `rerail-perf --timeline FILE` writes, shared by plot.py and
rails-report.py (stdlib only).

load_timeline(path) -> dict with
  t          bin start times (s)
  rails      rail names (columns)
  rows       GB/s per bin per rail ([bin][rail])
  completed  GB/s per bin of bytes the receivers acknowledged (JSON only; None otherwise)
  events     [(t_s, kind, text)]
  meta       {key: value}
  bin_s      bin width (s)
CSV: header `t_s,<rail>...,total`, `# event,t,kind,text` and `# meta,key,value` lines.
Raises ValueError on a file that is not a rerail-perf timeline; OSError when unreadable.
"""
import csv
import json


def load_timeline(path):
    if path.endswith(".json"):
        with open(path) as f:
            j = json.load(f)
        completed = j.get("completed_gbps")
        return {
            "t": [float(v) for v in j["t_s"]],
            "rails": list(j["rails"]),
            "rows": j["gbps"],
            "completed": [float(v) for v in completed] if completed else None,
            "events": [(float(e["t_s"]), e["kind"], e["text"]) for e in j.get("events", [])],
            "meta": j.get("meta", {}),
            "bin_s": float(j["bin_s"]),
        }
    t, rows, events, meta, rails = [], [], [], {}, None
    with open(path, newline="") as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("# event,"):
                _, ts, kind, text = line.split(",", 3)
                events.append((float(ts), kind, text))
            elif line.startswith("# meta,"):
                _, key, value = line.split(",", 2)
                meta[key] = value
            elif line.startswith("#") or not line:
                continue
            elif rails is None:
                header = next(csv.reader([line]))
                if header[0] != "t_s" or header[-1] != "total":
                    raise ValueError("not a rerail-perf timeline (header %r)" % header[:3])
                rails = header[1:-1]
            else:
                vals = [float(v) for v in line.split(",")]
                t.append(vals[0])
                rows.append(vals[1:-1])
    if rails is None:
        raise ValueError("empty timeline")
    bin_s = round(t[1] - t[0], 9) if len(t) > 1 else 0.1
    return {"t": t, "rails": rails, "rows": rows, "completed": None, "events": events, "meta": meta, "bin_s": bin_s}
