"""The CPU path: worlds stepped by MuJoCo's C engine in collector processes while learner processes update
(decoupled). `workers.train` runs it; `collector`, `learner`, `teams`, `processes`, `buffers` and `shm`
are its parts."""
