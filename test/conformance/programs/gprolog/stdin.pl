:- initialization(main).
main :- get_char(C), copy(C).
copy(end_of_file) :- !.
copy(C) :- put_char(C), get_char(N), copy(N).
