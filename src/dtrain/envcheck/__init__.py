"""The job's own environment, checked before the GPUs are paid for (docs/environments.md).

source.py finds the environment in every form the spec allows; conda.py reads the conda file with the
line of each dependency; resolve.py resolves its pip part for the asked Python on Linux x86_64 (uv, else
pip); imports.py scans the code folder's imports; check.py puts them together for `validate --env`;
jobenv.py builds the virtual environment a local job runs in. Imports no backend."""
