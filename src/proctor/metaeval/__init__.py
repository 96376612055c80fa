"""Meta-evaluation statistics: how well automatic judges agree with human labels (and annotators with each
other). One implementation, used by `proctor view`, `proctor metaeval RUN_DIR` and reckon's report; see
`proctor.metaeval.agreement`."""
