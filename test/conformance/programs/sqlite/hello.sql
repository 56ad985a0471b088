SELECT 'Hello, World!';
