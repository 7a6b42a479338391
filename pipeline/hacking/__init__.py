"""Hacking: the search, on the cluster, for the smallest input each contestant's program gets
wrong (generated cases of every shape and growing size, judged in the sandbox as grading
judges, a failing case shrunk while it fails the same way), and its report. Imports
grade_service and everything below it."""
