"""code_exec (HumanEval): the program built from a completion, run confined, judged by its tests.

    code_exec      judge each sample's program, in parallel (a thread pool here, or Ray tasks)
    completion     a model's completion cleaned and joined with the prompt and the tests
    sandbox        one program run confined, with its verdict
    sandbox_child  the sandbox from inside (run as a script)
    sandbox_watch  the sandbox from outside: memory, folder size, its memory cgroup
"""
