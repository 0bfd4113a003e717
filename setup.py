"""Package list for setuptools (everything else is in pyproject.toml).

dtrain.job_templates and dtrain.training_scripts are the top-level job_templates/ and
training_scripts/ folders, mapped into the package by pyproject's package-dir; find_packages
cannot see them under src/, so they are named here.
"""
from setuptools import find_packages, setup

setup(packages=find_packages("src") + ["dtrain.job_templates", "dtrain.training_scripts"])
