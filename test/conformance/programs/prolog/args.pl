:- initialization(main, main).
main :- current_prolog_flag(argv, Args), forall(member(A, Args), writeln(A)).
