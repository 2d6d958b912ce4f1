"""Refit the shipped H200 database's SDDMM coefficients on its own entries, as `stuning tune` does
after tuning (driver.refit_model: every measured entry's top-k, incremental), for SDDMM only."""
import warnings

from stuning.db import TuningDB
from stuning.db.paths import shipped_dir
from stuning.db.storage import load_document, write_json_atomic
from stuning.tuning.device import spec_for
from stuning.tuning.features import ProblemFeatures
from stuning.tuning.registry import family
from stuning.tuning.session import model_for

warnings.filterwarnings("ignore")  # the entries are stale on any machine but the H200
h200 = spec_for("h200")
path = shipped_dir() / "nvidia-h200.json"
db = TuningDB.open(h200.name, search_path=[shipped_dir()])
model = model_for(db, h200)
fam = family("sddmm")
samples = []
for e in db.entries(include_stale=True).values():  # stale only here: this machine's Triton is not the H200's
    if e.op == "sddmm" and e.measured:
        f = ProblemFeatures("sddmm", e.dtype, dict(e.features))
        samples += [(f, fam.config_from_dict(t.config), t.time_us) for t in e.top_k if t.time_us is not None]
before = model.coefficients["sddmm"].as_dict()
after = model.fit("sddmm", samples, incremental=True).as_dict()
print(len(samples), "trials; c", [round(v, 3) for v in before["c"]], "->", [round(v, 3) for v in after["c"]],
      "fitted_on", before["fitted_on"], "->", after["fitted_on"])
doc = load_document(path)
doc["model_coefficients"]["sddmm"] = after
write_json_atomic(path, doc)
