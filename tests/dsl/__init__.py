"""Tests of the front ends, the writers and format conversion."""
