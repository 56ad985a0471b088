% An uncaught exception in an initialization directive is only a warning
% in GNU Prolog (exit status 0); exhausting the stack is a real run-time failure.
:- initialization(main).
main :- depth(N), write(N), nl.
depth(N) :- depth(M), N is M + 1.
