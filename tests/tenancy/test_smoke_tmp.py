def test_x(alice, client_for):
    r = client_for(alice).get("/api/v1/members/")
    print(r.status_code, r.json())
