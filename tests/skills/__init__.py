"""Tests of the skills lifecycle app (cadre.skills): candidates, scoring, approval."""
