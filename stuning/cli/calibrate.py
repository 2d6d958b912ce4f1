"""``stuning calibrate``: measure this GPU's ceilings and store them with its database."""

from __future__ import annotations

from stuning.cli.errors import EXIT_NO_GPU, EXIT_OK, CLIError
from stuning.cli.output import console, print_json, table


def register(sub) -> None:
    p = sub.add_parser("calibrate", help="measure this GPU's bandwidth and FLOP rates for the cost model")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    from stuning.tuning.calibrate import measure_ceilings
    from stuning.tuning.driver import can_measure
    from stuning.tuning.session import open_db

    if not can_measure():
        raise CLIError("calibrate measures a GPU, and no CUDA device is visible", EXIT_NO_GPU)
    ceilings = measure_ceilings()
    db = open_db()
    db.update_calibration(ceilings)
    path = db.save()
    if args.json:
        print_json({"device": db.device_name, "calibration": ceilings, "database": str(path)})
        return EXIT_OK
    rows = [["copy bandwidth (GB/s)", ceilings["dram_gbs"]], ["CUDA-core FMA (TFLOP/s)", ceilings["fp32_tflops"]]]
    rows += [[f"tensor {k} (TFLOP/s)", v] for k, v in ceilings["tensor_tflops"].items()]
    con = console()
    con.print(table(f"calibrated {db.device_name}", ["ceiling", "measured"], rows))
    con.print(f"stored in {path}")
    return EXIT_OK
