:- initialization(main).
main :-
    open('input.txt', read, In), read_all(In, Cs), close(In),
    open('output.txt', write, Out), upper_all(Cs, Out), close(Out).
read_all(In, Cs) :- get_char(In, C), ( C == end_of_file -> Cs = [] ; Cs = [C|T], read_all(In, T) ).
upper_all([], _).
upper_all([C|Cs], Out) :- upper_upper(C, U), put_char(Out, U), upper_all(Cs, Out).
upper_upper(C, U) :- ( char_code(C, X), X >= 0'a, X =< 0'z -> Y is X - 32, char_code(U, Y) ; U = C ).
