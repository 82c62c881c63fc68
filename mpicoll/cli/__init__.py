"""What the command-line tools share: size arguments, result tables and
plots, for the benchmark, the calibration and the time predictor."""
