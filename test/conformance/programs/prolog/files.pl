:- initialization(main, main).
main :-
    read_file_to_string("input.txt", S, [encoding(utf8)]),
    string_upper(S, U),
    setup_call_cleanup(open("output.txt", write, Out, [encoding(utf8)]), write(Out, U), close(Out)).
