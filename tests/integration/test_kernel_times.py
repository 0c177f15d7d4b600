"""scripts/kernel_times.py, which gpu.sh --profile runs over ncu's CSV: the sums,
the DRAM rate and the limiter it prints, on CSVs in the layout ncu writes
(its notes first, a header, a units row, one row per launch)."""
import subprocess
import sys

from conftest import ROOT

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size",'
          '"Grid Size","Device","CC"')


def write_csv(path, metrics, units, launches):
    lines = ["==PROF== Connected to process 1234 (minfer)", "==PROF== Profiling \"k\": 0%....50%....100% - 3 passes",
             HEADER + "".join(f',"{m}"' for m in metrics),
             '"","","","","","","","","","",""' + "".join(f',"{u}"' for u in units)]
    for i, (name, *values) in enumerate(launches):
        lines.append(f'"{i}","1234","minfer","host","{name}","1","7","(128, 1, 1)","(132, 1, 1)","0","9.0"' +
                     "".join(f',"{v}"' for v in values))
    path.write_text("\n".join(lines) + "\n")


def run(*args):
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "kernel_times.py"), *map(str, args)],
                          capture_output=True, text=True)


def row(out, kernel):
    return next(line.split() for line in out.splitlines() if line.startswith(kernel))


FULL = ["gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_write.sum",
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"]


def test_sums_rates_and_limiters(tmp_path):
    csv = tmp_path / "ncu.csv"
    write_csv(csv, FULL, ["nsecond", "byte", "byte", "%", "%"], [
        # 2 launches of a GEMV: 10 us each, 38.4 MB read + 0.1 MB written in all: 1,925 GB/s.
        ("gemv_kernel(const float *, int)", "10,000", "19,200,000", "50,000", "40.0", "90.0"),
        ("gemv_kernel(const float *, int)", "10,000", "19,200,000", "50,000", "40.0", "92.0"),
        ("prefill_bf16_kernel<128>(DeviceStep)", "30,000", "1,000,000", "0", "75.0", "30.0"),
        ("rms_norm_kernel(float *)", "5,000", "100,000", "100,000", "10.0", "20.0"),
    ])
    proc = run(csv, "--steps", 2)
    assert proc.returncode == 0, proc.stderr
    gemv = row(proc.stdout, "gemv_kernel")
    assert gemv[1:5] == ["2", "20.0", "10.00", "36.4%"]
    assert gemv[5:7] == ["1925.0", "45.9%"]  # 38.5 MB in 20 us, of 4.19 TB/s
    assert gemv[7:] == ["40.0", "91.0", "memory"]
    assert row(proc.stdout, "prefill_bf16_kernel")[-1] == "SM"
    assert row(proc.stdout, "rms_norm_kernel")[-1] == "latency"
    assert "per step (2 steps): 27.5 us of kernels, 2 launches" in proc.stdout


def test_time_only_and_scaled_units(tmp_path):
    csv = tmp_path / "ncu.csv"
    write_csv(csv, ["gpu__time_duration.sum"], ["usecond"], [("a_kernel", "1.5"), ("b_kernel", "0.5")])
    proc = run(csv)
    assert proc.returncode == 0, proc.stderr
    assert row(proc.stdout, "a_kernel")[1:5] == ["1", "1.5", "1.50", "75.0%"]
    assert "GB/s" not in proc.stdout and "limiter" not in proc.stdout

    write_csv(csv, FULL, ["msecond", "Mbyte", "Kbyte", "%", "%"], [("c_kernel", "0.002", "4", "0", "70", "10")])
    proc = run(csv, "--bandwidth", 4e12)
    assert row(proc.stdout, "c_kernel")[1:] == ["1", "2.0", "2.00", "100.0%", "2000.0", "50.0%", "70.0", "10.0", "SM"]


def test_not_an_ncu_csv(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text('"a","b"\n"1","2"\n')
    proc = run(bad)
    assert proc.returncode != 0 and "gpu__time_duration" in proc.stderr
