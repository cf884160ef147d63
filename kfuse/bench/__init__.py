"""`kfuse bench`: a folder of problems judged with their candidates (runner: discovery, jobs, cache, workers or
Ray; report: the summary, results.json and report.html). Built on the judge (kfuse.judge)."""
