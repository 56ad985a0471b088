:- initialization(main, main).
main :- writeln("Hello, World!").
