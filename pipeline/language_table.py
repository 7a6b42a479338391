"""The languages judged by default (`judge.languages`), as plain data: how each is compiled,
run and versioned in the sandbox, its limits and its Debian package (docs/judging.md)."""

from __future__ import annotations

from typing import Any

# In compile and run commands: {file} is the entry file's name, {stem} that name without its
# extension, {memory_mb} a run's memory limit in MiB and {heap_mb} that less `runtime_mb`.
_JVM_FLAGS = [
    "-Dfile.encoding=UTF-8",
    "-XX:+UseSerialGC",
    "-Xss64m",
    "-Xms{heap_mb}m",
    "-Xmx{heap_mb}m",
    "-XX:-UsePerfData",
    "-XX:+ExitOnOutOfMemoryError",
    "-XX:+DisplayVMOutputToStderr",
    "-Xlog:disable",
    "-Xlog:all=warning:stderr",
]
# what a JVM says on standard error when its heap, not the machine, ran out: MLE, not RE
_JVM_MEMORY = ["java.lang.OutOfMemoryError: Java heap space", "GC overhead limit exceeded"]
_JVM = {
    "processes": 64,  # the JVM's own threads (compilers, GC, signal, finaliser...) count
    "runtime_mb": 64,  # an empty JVM holds about 40 MB besides the heap
    "memory_errors": _JVM_MEMORY,
    "system": ["/etc/java-*"],  # the JDK's configuration (its security file)
    "compile_seconds": 60,
    "compile_memory_mb": 2048,
}

LANGUAGES: dict[str, dict[str, Any]] = {
    "cpp": {
        "name": "C++",
        "extensions": [".cpp", ".cc", ".cxx", ".c++", ".C"],
        "codes": ["c++", "g++"],
        "compile": ["/usr/bin/g++", "-std=c++17", "-O2", "-pipe", "-o", "main", "{file}"],
        "run": ["./main"],
        "version": ["/usr/bin/g++", "--version"],
        "package": "g++",
    },
    "c": {
        "name": "C",
        "extensions": [".c"],
        "compile": ["/usr/bin/gcc", "-std=c11", "-O2", "-pipe", "-o", "main", "{file}", "-lm"],
        "run": ["./main"],
        "version": ["/usr/bin/gcc", "--version"],
        "package": "gcc",
    },
    "python": {
        "name": "Python 3",
        "extensions": [".py", ".py3"],
        "codes": ["python3", "cpython", "cpython3", "py3"],
        "compile": ["/usr/bin/python3", "-I", "-S", "-m", "py_compile", "{file}"],
        "run": ["/usr/bin/python3", "-I", "-S", "{file}"],
        "version": ["/usr/bin/python3", "--version"],
        "package": "python3",
    },
    "pypy3": {
        "name": "Python 3 (PyPy)",
        "extensions": [".py", ".py3"],
        "codes": ["pypy", "pypy3"],
        "shebang": r"^#!.*\bpypy3?\b",
        "compile": ["/usr/bin/pypy3", "-I", "-S", "-m", "py_compile", "{file}"],
        "run": ["/usr/bin/pypy3", "-I", "-S", "{file}"],
        "version": ["/bin/sh", "-c", "/usr/bin/pypy3 --version 2>&1 | grep -m1 PyPy"],
        "package": "pypy3",
    },
    "java": {
        "name": "Java",
        "extensions": [".java"],
        "compile": ["/usr/bin/javac", "-encoding", "UTF-8", "-d", ".", "{file}"],
        "run": ["/usr/bin/java", *_JVM_FLAGS, "-cp", ".", "{stem}"],
        # a public class must be in a file of its name: main.java holding `public class Main`
        # is compiled as Main.java
        "entry_pattern": r"(?m)^\s*public\s+(?:final\s+|abstract\s+)*class\s+(\w+)",
        "version": ["/usr/bin/javac", "-version"],
        "package": "default-jdk-headless",
        **_JVM,
    },
    "kotlin": {
        "name": "Kotlin",
        "extensions": [".kt"],
        "codes": ["kt"],
        "compile": ["/usr/bin/kotlinc", "{file}", "-include-runtime", "-d", "{stem}.jar"],
        "run": ["/usr/bin/java", *_JVM_FLAGS, "-jar", "{stem}.jar"],
        "version": ["/bin/sh", "-c", "/usr/bin/kotlinc -version 2>&1 | grep -m1 kotlinc"],
        "package": "kotlin",
        **_JVM,
        "compile_seconds": 120,  # kotlinc takes seconds for hello world
    },
    "rust": {
        "name": "Rust",
        "extensions": [".rs"],
        "codes": ["rs"],
        "compile": ["/usr/bin/rustc", "-O", "--edition", "2021", "-o", "main", "{file}"],
        "run": ["./main"],
        "version": ["/usr/bin/rustc", "--version"],
        "package": "rustc",
        "compile_seconds": 60,
        "compile_memory_mb": 2048,
    },
    "go": {
        "name": "Go",
        "extensions": [".go"],
        "codes": ["golang"],
        # the build cache is the sandbox's private /tmp (HOME): nothing outlives the build
        "compile": [
            "/usr/bin/env",
            "CGO_ENABLED=0",
            "/usr/bin/go",
            "build",
            "-o",
            "main",
            "{file}",
        ],
        "run": ["./main"],
        "version": ["/usr/bin/go", "version"],
        "package": "golang-go",
        "processes": 32,  # the Go runtime's threads
        "compile_seconds": 60,
        "compile_memory_mb": 2048,
    },
    "javascript": {
        "name": "JavaScript (Node.js)",
        "extensions": [".js"],
        "codes": ["js", "node", "nodejs"],
        "compile": ["/usr/bin/node", "--check", "{file}"],
        "run": ["/usr/bin/node", "--stack-size=65500", "--max-old-space-size={heap_mb}", "{file}"],
        "version": ["/usr/bin/node", "--version"],
        "package": "nodejs",
        "processes": 32,  # node's own threads (V8's platform, libuv's pool)
        "runtime_mb": 32,
        "memory_errors": ["JavaScript heap out of memory"],
    },
    "csharp": {
        "name": "C#",
        "extensions": [".cs"],
        "codes": ["c#", "cs", "mono"],
        "compile": ["/usr/bin/mcs", "-optimize+", "-r:System.Numerics", "-out:main.exe", "{file}"],
        "run": ["/usr/bin/mono", "main.exe"],
        "version": ["/usr/bin/mcs", "--version"],
        "package": "mono-mcs",
        "processes": 32,  # mono's own threads
        "system": ["/etc/mono"],
    },
}

# Languages not judged here, by a shebang or an extension of theirs: such a program is listed
# as not judged, never a CE
NOT_SUPPORTED = {r"^#!.*\bpython2\b": "Python 2"}
NOT_SUPPORTED_EXTENSIONS = {".py2": "Python 2"}
