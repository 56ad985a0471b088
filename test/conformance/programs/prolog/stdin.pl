:- initialization(main, main).
main :-
    set_stream(user_input, type(binary)),
    set_stream(user_output, type(binary)),
    copy_stream_data(user_input, user_output).
