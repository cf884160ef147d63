"""Problem 25 (Matmul, /2, sum over features, x1.5): allclose failures of the old and new GEMM kernels' ModelNew
over many input seeds, against the reference's own, plus a bitwise determinism check (a race shows up there)."""
import copy, importlib.util, json, sys
import torch
sys.path.insert(0, ".")
from kfuse.problem import load_problem, make_inputs, build_reference
from kfuse.compare import compare_outputs

torch.backends.cuda.matmul.allow_tf32 = False
dev = torch.device("cuda")
problem, init = load_problem("suite/level2/25_Matmul_Divide_Sum_Scaling.py")
ref = build_reference(problem, init, seed=0, device=dev)
ref64 = copy.deepcopy(ref).double()
rows = {}
for label in ("old", "new"):
    spec = importlib.util.spec_from_file_location(f"c_{label}", f"results/gemm-tma-NVIDIA-H100-80GB-HBM3-2026-11-23/probe-25/{label}_25.py")
    mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
    cand = mod.ModelNew(*init).to(dev); cand.load_state_dict(ref.state_dict())
    fails = ref_fails = nondet = 0; worst = 0.0; worst_ref = 0.0
    for seed in range(60):
        (x,) = make_inputs(problem, seed, dev)
        with torch.no_grad():
            a, b, r = cand(x), cand(x), ref(x)
            t = ref64(x.double())
        nondet += int(not torch.equal(a, b))
        c = compare_outputs(a, r, t).tensors[0]
        fails += int(not c.kernelbench_pass); ref_fails += int(not c.ref_accurate)
        worst = max(worst, c.e_cand); worst_ref = max(worst_ref, c.e_ref)
    rows[label] = dict(allclose_fails=fails, ref_inaccurate=ref_fails, nondeterministic=nondet,
                       max_err_vs_f64=worst, ref_max_err_vs_f64=worst_ref)
    print(label, rows[label], flush=True)
print(json.dumps(rows))
